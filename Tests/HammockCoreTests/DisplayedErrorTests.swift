import HammockCore
import HammockJSON
import Testing

@Suite struct DisplayedError {
    @Test func aSecretIsRedactedBeforeTheMessageIsShortened() {
        let secret = "tok-0123456789abcdef0123456789abcdef"
        let before = SourceError.displayedMessageLimit - 10
        let error = SourceError(message: String(repeating: "x", count: before) + secret + " was refused", httpStatus: 401)
        let shown = error.displayed(redactor: Redactor(secrets: [secret]))
        #expect(shown["message"] == .string(String(repeating: "x", count: before) + "[redacted]…"))
        #expect(shown["httpStatus"] == 401)
    }

    @Test func aShortMessageIsOnlyRedacted() {
        let error = SourceError(message: "bad key abc123", code: SourceError.Code("http"))
        #expect(error.displayed(redactor: Redactor(secrets: ["abc123"])) == ["message": "bad key [redacted]", "code": "http"])
    }

    @Test func aLongLineIsCutAfterTheLimitInScalars() {
        let limit = SourceError.displayedMessageLimit
        let error = SourceError(message: String(repeating: "é", count: limit + 200))
        let message = error.displayed(redactor: .none)["message"]?.stringValue ?? ""
        #expect(message == String(repeating: "é", count: limit) + "…")
    }

    @Test func aShortSecretInsideRedactedIsNotRedactedTwice() {
        let error = SourceError(message: "act now")
        let line = OutputLine.source(id: "s", event: nil, state: SourceState(latestError: error))
        let text = String(decoding: line.encoded(seq: 1, redactor: Redactor(secrets: ["act"])), as: UTF8.self)
        #expect(text.contains(#""message":"[redacted] now""#), "\(text)")
        // Nor does a shorter secret match inside the replacement of a longer one.
        #expect(Redactor(secrets: ["xactx", "act"]).redact("xactx and act") == "[redacted] and [redacted]")
    }
}
