#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HammockConfig
import HammockCore

// YAML text through the whole configuration checker: it returns a configuration or diagnostics,
// never crashes. Every diagnostic carries a message and a mark inside the text, and what `hammock check`
// would print of them quotes no secret's value.
private let environment = [
    "HOME": "/home/fuzz", "TOKEN": "secret-token", "EMPTY": "", "PORT": "8080",
    // Values no seed or dictionary entry holds, so a diagnostic can only quote them by reading them.
    "API_KEY": "k3y-0f-the-fuzzer", "ODD_SECRET": "50%/qu\"ote&back\\slash",
]
private let loader = ConfigurationLoader(
    environment: environment, kindIsAvailable: { ["fake", "shell", "file", "rest"].contains($0) }
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
        checkNoSecretIsShown(error, text: text)
    }
    return 0
}

/// What `hammock check` prints (every diagnostic, redacted with the secrets the loader found, as
/// `ConfigurationArguments.report` does) must not hold a secret's value. The secrets are those the loader
/// declared, and, found here without the loader, the value of each `${secret:NAME}` of ours in the text: a secret
/// the loader failed to record would otherwise go unredacted and unnoticed. A `NAME` the text also reads as
/// plain `${NAME}` (visible where it is not a credential), or whose value the text holds literally, is left
/// out of the second set.
private func checkNoSecretIsShown(_ error: ConfigurationError, text: String) {
    let shown = Redactor(secrets: error.secrets).redact(error.description)
    var secrets = error.secrets
    for name in ["TOKEN", "API_KEY", "ODD_SECRET"] where text.contains("${secret:\(name)}") {
        guard let value = environment[name] else { continue }
        let readPlainly = text.contains("${\(name)}") || text.contains("${\(name):-")
        if !readPlainly && !text.contains(value) { secrets.insert(value) }
    }
    // `[redacted]` itself may hold a short secret ("a", "red"): look only between the marks.
    let pieces = shown.split(separator: Redactor.replacement, omittingEmptySubsequences: false)
    for secret in secrets where !secret.isEmpty {
        require(!pieces.contains { $0.contains(secret) }, "a diagnostic shows the secret \"\(secret)\": \(shown)")
    }
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
