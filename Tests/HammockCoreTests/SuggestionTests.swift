import HammockCore
import Testing

@Suite struct Suggestions {
    @Test func swappedLettersCountAsOneEdit() {
        #expect(closestMatch(to: "jsno", among: ["json", "yaml", "text", "lines"]) == "json")
        #expect(closestMatch(to: "usres", among: ["users", "posts"]) == "users")
    }

    @Test func farOffWordsGetNoSuggestion() {
        #expect(closestMatch(to: "banana", among: ["json", "yaml"]) == nil)
    }

    @Test func veryShortWordsGetNoSuggestion() {
        #expect(closestMatch(to: "c", among: ["a", "b"]) == nil)
        #expect(closestMatch(to: "ur", among: ["url"]) == nil)
    }

    @Test func tiesAreBrokenAlphabetically() {
        #expect(closestMatch(to: "web3", among: ["web2", "web1"]) == "web1")
    }
}
