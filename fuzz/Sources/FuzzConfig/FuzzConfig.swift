#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HammockConfig
import HammockCore

// YAML text through the whole configuration checker: it returns a configuration or diagnostics,
// never crashes. Every diagnostic carries a message and a mark inside the text.
private let loader = ConfigurationLoader(
    environment: ["HOME": "/home/fuzz", "TOKEN": "secret-token", "EMPTY": "", "PORT": "8080"],
    kindIsAvailable: { ["shell", "file", "rest"].contains($0) }
)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let lines = yamlLineCount(text)
    switch loader.parse(text, file: "fuzz.yaml") {
    case .success(let loaded):
        _ = loaded.configuration.sources.count
    case .failure(let error):
        require(!error.diagnostics.isEmpty, "a failure without diagnostics")
        for diagnostic in error.diagnostics {
            require(!diagnostic.message.isEmpty, "empty diagnostic")
            require(diagnostic.mark.line >= 1 && diagnostic.mark.line <= lines && diagnostic.mark.column >= 1,
                         "diagnostic mark \(diagnostic.mark) outside the text (\(lines) lines): \(diagnostic.message)")
        }
        _ = error.description
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

/// Lines as libyaml counts them: LF, CR, CRLF, NEL, LS and PS each end one.
private func yamlLineCount(_ text: String) -> Int {
    var lines = 1
    var previous: Unicode.Scalar = "\0"
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\n" where previous == "\r": break
        case "\n", "\r", "\u{85}", "\u{2028}", "\u{2029}": lines += 1
        default: break
        }
        previous = scalar
    }
    return lines
}
