import HammockCore
import HammockJSON
import Testing

/// A secret comes back in other spellings than the one configured: percent-encoded by a server that writes
/// lower-case hex, or in the other Unicode normalization form. Each must be redacted all the same.
@Suite struct RedactorForms {
    @Test func aPercentEncodedSecretIsRedactedWhateverTheCaseOfItsHexDigits() {
        let secret = "a/b c+d=é"
        let redactor = Redactor(secrets: [secret])
        let upper = secret.percentEncodedForURL
        #expect(upper.contains("%2F"), "the encoding this test starts from: \(upper)")
        let lower = upper.replacing("%2F", with: "%2f").replacing("%2B", with: "%2b").replacing("%C3%A9", with: "%c3%a9")
        let mixed = upper.replacing("%2F", with: "%2f")
        for echoed in [upper, lower, mixed] {
            #expect(redactor.redact("echo ?t=\(echoed)&x=1") == "echo ?t=[redacted]&x=1", "\(echoed)")
            #expect(redactor.redact(JSONValue.string("url: \(echoed)")) == .string("url: [redacted]"), "\(echoed)")
        }
        // The text around the secret keeps its own escapes as they were written.
        #expect(redactor.redact("%2fkeep \(lower) %3a") == "%2fkeep [redacted] %3a")
    }

    @Test func aSecretIsRedactedInEitherNormalizationForm() {
        let composed = "caf\u{E9}-\u{1E0C}\u{307}-token"  // é, and Ḍ followed by a dot above
        let decomposed = "cafe\u{301}-D\u{323}\u{307}-token"
        #expect(Array(composed.utf8) != Array(decomposed.utf8))
        for (configured, echoed) in [(composed, decomposed), (decomposed, composed), (composed, composed)] {
            let redactor = Redactor(secrets: [configured])
            #expect(redactor.redact("got \(echoed)!") == "got [redacted]!", "\(Array(configured.unicodeScalars)) echoed as \(Array(echoed.unicodeScalars))")
            // And percent-encoded in the other form.
            #expect(redactor.redact("q=\(echoed.percentEncodedForURL)") == "q=[redacted]")
        }
    }

    @Test func anExcerptIsRedactedBeforeItIsCut() {
        let secret = "tok-0123456789abcdef0123456789abcdef"
        let redactor = Redactor(secrets: [secret])
        // The cut at 120 bytes falls 20 bytes into the secret; redacted first, what is left fits.
        let line = Array((String(repeating: "x", count: 100) + secret + " and more").utf8)
        #expect(redactor.excerpt(line, limit: 120) == String(repeating: "x", count: 100) + "[redacted] and more")
        #expect(Redactor.none.excerpt(line, limit: 120) == String(repeating: "x", count: 100) + secret.prefix(20) + "…")
        let long = Array((String(repeating: "x", count: 100) + secret + String(repeating: " and more", count: 20)).utf8)
        #expect(redactor.excerpt(long, limit: 120) == String(repeating: "x", count: 100) + "[redacted] and more …")
        // A short line is not cut; a cut never splits a character.
        #expect(redactor.excerpt(Array("short \(secret)".utf8), limit: 120) == "short [redacted]")
        #expect(Redactor.none.excerpt(Array("aé".utf8), limit: 2) == "a…")
    }
}
