import HammockCore
import HammockJSON
import Testing

// Issue 11, item 16: a value filled into a URL must not climb its path. `/` is encoded already; `.` and `..`
// are whole path segments made of unreserved characters, which percent-encoding alone left as they were.
@Suite struct TemplateDotSegments {
    func rendered(_ template: String, _ value: JSONValue) throws -> String {
        let parsed = try #require(try Template.parse(template))
        return try parsed.render(percentEncode: true) { _ in value }.get()
    }

    @Test func aValueOfDotsAloneHasEveryDotEncoded() throws {
        #expect(try rendered("http://x/api/v1/{{ s }}/echo", "..") == "http://x/api/v1/%2E%2E/echo")
        #expect(try rendered("http://x/api/v1/{{ s }}/echo", ".") == "http://x/api/v1/%2E/echo")
        #expect(try rendered("http://x/api/v1/{{ s }}/echo", "...") == "http://x/api/v1/%2E%2E%2E/echo")
        // A dot written beside the template cannot complete a dot segment either.
        #expect(try rendered("http://x/a/.{{ s }}/b", ".") == "http://x/a/.%2E/b")
    }

    @Test func dotsAmongOtherCharactersStayReadable() throws {
        #expect(try rendered("http://x/v/{{ s }}", "v1.2") == "http://x/v/v1.2")
        #expect(try rendered("http://x/v/{{ s }}", "a..b") == "http://x/v/a..b")
        #expect(try rendered("http://x/v/{{ s }}", "../..") == "http://x/v/..%2F..")
        #expect(try rendered("http://x/v/{{ s }}", "") == "http://x/v/")
    }

    @Test func outsideAURLAndAtTheOpeningOfOneAValueIsAsItIs() throws {
        let parsed = try #require(try Template.parse("{{ s }}/x"))
        #expect(parsed.render(percentEncode: false) { _ in ".." } == .success("../x"))
        #expect(try rendered("{{ s }}/x", "http://h/a/..") == "http://h/a/../x")
    }

    @Test func theEncodingOnItsOwn() {
        #expect("..".percentEncodedAsURLValue == "%2E%2E")
        #expect(".".percentEncodedAsURLValue == "%2E")
        #expect("a b".percentEncodedAsURLValue == "a%20b")
        #expect("..".percentEncodedForURL == "..", "query values and secrets' encoded forms are unchanged")
    }
}
