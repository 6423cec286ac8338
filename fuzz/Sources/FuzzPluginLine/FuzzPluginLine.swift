#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HammockJSON
import HammockProtocol

// One line as both sides of the plugin protocol would read it. Decoding never crashes; a decoded
// message encodes to a line that decodes to the same message again.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let line = UnsafeBufferPointer(start: data, count: size)

    if let message = try? PluginMessage(line: line) {
        let again: PluginMessage
        do {
            again = try PluginMessage(line: message.line.dropLast())
        } catch {
            fail("plugin message \(message) re-encodes to an undecodable line: \(error)")
        }
        require(again == message, "plugin message round trip: \(message) became \(again)")
    }

    if let message = try? EngineMessage(line: line) {
        let again: EngineMessage
        do {
            again = try EngineMessage(line: message.line.dropLast())
        } catch {
            fail("engine message \(message) re-encodes to an undecodable line: \(error)")
        }
        require(again == message, "engine message round trip: \(message) became \(again)")
    }
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
