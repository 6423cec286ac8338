import Foundation
import HammockConfig
import HammockCore
import Testing

/// "Every secret … is replaced by `[redacted]` inside … `check`'s diagnostics" (docs/configuration.md).
/// The same check as the FuzzConfig target's, over broken configurations written by hand: what `hammock
/// check` would print (every diagnostic, redacted with the secrets the loader found) holds no secret's
/// value. The secrets are named by the test from the documented rules, not taken from the loader alone, so a
/// secret the loader fails to record is caught too.
@Suite struct SecretsInDiagnostics {
    static let environment = [
        "TOKEN": "tok-SECRET-1",
        "PASS": "pa55-SECRET-2",
        "ODD": "50%/o?d&SECRET-3",
        "CONTROL": "esc\u{1B}SECRET-5",
    ]

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let text: String
        /// Values the documentation makes secrets in `text`.
        let secrets: [String]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "a ${secret:} in a source's duration",
            text: """
                sources:
                  a: { kind: fake, content: 1, timeout: "${secret:TOKEN}" }
                """,
            secrets: ["tok-SECRET-1"]),
        Case(
            name: "a ${secret:} in defaults",
            text: """
                defaults: { refresh: "${secret:TOKEN}", retry: { initial: "${secret:PASS}" } }
                sources:
                  a: { kind: fake, content: 1 }
                """,
            secrets: ["tok-SECRET-1", "pa55-SECRET-2"]),
        Case(
            name: "a ${secret:} in defaults, and sources that are not a mapping",
            text: """
                defaults: { expiration: "${secret:TOKEN}" }
                sources: [a, b]
                """,
            secrets: ["tok-SECRET-1"]),
        Case(
            name: "a header's ${NAME}, quoted where it is not a secret",
            text: """
                sources:
                  a:
                    kind: rest
                    url: http://127.0.0.1:9/
                    headers: { Authorization: "Bearer ${PASS}" }
                    refresh: "${PASS}"
                """,
            secrets: ["pa55-SECRET-2"]),
        Case(
            name: "a header's ${NAME:-default}, quoted where it is not a secret",
            text: """
                sources:
                  a:
                    kind: rest
                    url: http://127.0.0.1:9/
                    headers: { X-Key: "${UNSET_KEY:-dflt-SECRET-4}" }
                    expiration: "${UNSET_KEY:-dflt-SECRET-4}"
                """,
            secrets: ["dflt-SECRET-4"]),
        Case(
            name: "a secret with URL and JSON special characters",
            text: """
                sources:
                  a: { kind: shell, command: [true], env: { K: "${ODD}" }, timeout: "${ODD}" }
                """,
            secrets: ["50%/o?d&SECRET-3"]),
        Case(
            name: "secrets beside a view, a select and a cache that are wrong",
            text: """
                sources:
                  a: { kind: fake, content: 1, select: "${secret:TOKEN}", cache: "${secret:PASS}" }
                views:
                  v: { sources: [a], display: "${secret:TOKEN}", ready: "${secret:PASS}" }
                """,
            secrets: ["tok-SECRET-1", "pa55-SECRET-2"]),
        Case(
            name: "a secret beside a template error and a cycle",
            text: """
                sources:
                  a: { kind: shell, script: "echo {{ b.x }}", env: { K: "${TOKEN}" }, timeout: "${TOKEN}" }
                  b: { kind: shell, command: [echo, "{{ a.y }}"], refresh: "${secret:PASS}" }
                """,
            secrets: ["tok-SECRET-1", "pa55-SECRET-2"]),
        Case(
            name: "a secret in a YAML file that does not parse further down",
            text: """
                defaults: { timeout: "${secret:TOKEN}" }
                sources:
                  a: { kind: fake, content: [unclosed
                """,
            secrets: ["tok-SECRET-1"]),
    ]

    @Test(arguments: cases)
    func checkQuotesNoSecret(_ example: Case) {
        Self.expectNoSecretShown(example)
    }

    /// The reader returns early when `sources:` is missing and never records the secrets it read before:
    /// `TOKEN=tok-SECRET-1 hammock check` on the file below prints
    /// `c.yaml:1:22: timeout: "tok-SECRET-1" is not a duration; …` (and `hammock run` the same on stderr).
    @Test
    func checkQuotesNoSecretWhenSourcesAreMissing() {
        Self.expectNoSecretShown(
            Case(
                name: "a ${secret:} in defaults, and no sources",
                text: #"defaults: { timeout: "${secret:TOKEN}" }"#,
                secrets: ["tok-SECRET-1"]))
    }

    static func expectNoSecretShown(_ example: Case, sourceLocation: SourceLocation = #_sourceLocation) {
        switch loader(Self.environment).parse(example.text, file: "secrets.yaml") {
        case .success:
            Issue.record("\(example.name): the configuration must be broken", sourceLocation: sourceLocation)
        case .failure(let error):
            let shown = shownByCheck(error)
            #expect(!error.diagnostics.isEmpty, sourceLocation: sourceLocation)
            let leaked = leakedSecrets(in: shown, secrets: example.secrets + Array(error.secrets))
            #expect(leaked.isEmpty, "\(example.name): \(leaked) shown in:\n\(shown)", sourceLocation: sourceLocation)
        }
    }

    /// Diagnostics show control characters escaped; a secret holding one must not show in that form either.
    /// The redactor looks for the plain, percent-encoded and JSON-escaped forms (`\u001b`), not the
    /// diagnostics' own `\u{1B}`, so this prints `timeout: "esc\u{1B}SECRET-5" is not a duration`.
    @Test
    func aSecretWithAControlCharacterIsNotShownEscaped() {
        let text = """
            sources:
              a: { kind: fake, content: 1, timeout: "${secret:CONTROL}" }
            """
        guard case .failure(let error) = loader(Self.environment).parse(text, file: "secrets.yaml") else {
            Issue.record("the configuration must be broken")
            return
        }
        let shown = shownByCheck(error)
        #expect(leakedSecrets(in: shown, secrets: ["esc\u{1B}SECRET-5"]).isEmpty, "\(shown)")
    }

    /// A file's content read by `${file:}` is a secret wherever it stands, its final newline aside.
    @Test func aFileSecretQuotedInADiagnosticIsRedacted() throws {
        let path = FileManager.default.temporaryDirectory.path + "/hammock-secret-\(UUID().uuidString)"
        try Data("from-a-FILE-secret\n".utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let text = """
            sources:
              a: { kind: fake, content: 1, timeout: "${file:\(path)}" }
            """
        guard case .failure(let error) = loader(Self.environment).parse(text, file: "secrets.yaml") else {
            Issue.record("the configuration must be broken")
            return
        }
        let shown = shownByCheck(error)
        #expect(leakedSecrets(in: shown, secrets: ["from-a-FILE-secret"]).isEmpty, "\(shown)")
        #expect(shown.contains(Redactor.replacement), "the duration problem quotes the value, redacted: \(shown)")
    }
}

/// What `hammock check` prints of `error`: every diagnostic as `FILE:LINE:COLUMN: message`, redacted with
/// the secrets the configuration declared (as `ConfigurationArguments.report` does).
func shownByCheck(_ error: ConfigurationError) -> String {
    Redactor(secrets: error.secrets).redact(error.description)
}

/// The secrets that `shown` holds outside its `[redacted]` marks, plainly or with control characters
/// escaped as diagnostics escape them.
func leakedSecrets(in shown: String, secrets: [String]) -> [String] {
    let pieces = shown.components(separatedBy: Redactor.replacement)
    return Set(secrets).sorted().filter { secret in
        guard !secret.isEmpty else { return false }
        return pieces.contains { $0.contains(secret) || $0.contains(escapedAsInDiagnostics(secret)) }
    }
}

/// `text` with control characters written as a diagnostic writes them (`\n`, `\t`, `\u{1B}`).
func escapedAsInDiagnostics(_ text: String) -> String {
    var result = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\n": result += "\\n"
        case "\r": result += "\\r"
        case "\t": result += "\\t"
        case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value):
            result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        default: result.unicodeScalars.append(scalar)
        }
    }
    return result
}
