#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HammockJSON

// Parse → write → parse gives the same value, and writing that value again gives the same bytes
// (the writer's output is canonical). Rejected input only ever throws, with an offset inside the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    let value: JSONValue
    do {
        value = try JSONValue(parsing: input)
    } catch {
        require(error.offset >= 0 && error.offset <= size, "error offset \(error.offset) outside \(size) bytes")
        return 0
    }
    let written = value.jsonBytes
    let reparsed: JSONValue
    do {
        reparsed = try JSONValue(parsing: written)
    } catch {
        fail("written JSON does not parse: \(error): \(String(decoding: written, as: UTF8.self))")
    }
    require(reparsed == value, "round trip changed the value: \(value) became \(reparsed)")
    require(reparsed.jsonBytes == written, "writing is not stable for \(value)")
    // The String entry point must agree with the byte one.
    let text = String(decoding: written, as: UTF8.self)
    require((try? JSONValue(parsing: text)) == value, "String and byte parsing disagree on \(text)")
    return 0
}

// Checks that say what failed: precondition messages are dropped in release builds.
private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

private func fail(_ message: String) -> Never {
    let line = Array("fuzz check failed: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    abort()
}
