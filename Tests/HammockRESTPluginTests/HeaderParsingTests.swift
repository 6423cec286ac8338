import Foundation
import Testing

@testable import HammockRESTPlugin

/// `Link`, `Retry-After`, HTTP dates and media types, in-process.
@Suite struct LinkHeaderTests {
    @Test func theNextTargetAmongOthers() {
        let github = #"<https://api.github.com/r?page=2>; rel="next", <https://api.github.com/r?page=5>; rel="last""#
        #expect(nextLink(in: [github]) == "https://api.github.com/r?page=2")
        let nextLast = #"<https://h/r?page=1>; rel="first", <https://h/r?page=3>; rel="next""#
        #expect(nextLink(in: [nextLast]) == "https://h/r?page=3")
    }

    @Test func relationsAreWordsInAnyCaseQuotedOrNot() {
        #expect(nextLink(in: ["</p2>; rel=next"]) == "/p2")
        #expect(nextLink(in: [#"</p2>; REL="Next""#]) == "/p2")
        #expect(nextLink(in: [#"</p2>; rel="prefetch next""#]) == "/p2")
        #expect(nextLink(in: [#"</p2> ; title="x" ; rel = "next""#]) == "/p2")
        #expect(nextLink(in: [#"</p2>; rel="nextpage""#]) == nil)
        #expect(nextLink(in: [#"</p2>; title="next""#]) == nil)
    }

    @Test func aCommaInsideQuotesDoesNotEndTheLink() {
        #expect(nextLink(in: [#"</p1>; title="a, <b>"; rel="prev", </p2>; rel="next""#]) == "/p2")
        #expect(nextLink(in: [#"</p1>; title="x, rel=next", </p3>; rel="last""#]) == nil)
    }

    @Test func aLinkInALaterHeaderValue() {
        #expect(nextLink(in: [#"</p0>; rel="prev""#, #"</p2>; rel="next""#]) == "/p2")
        #expect(nextLink(in: []) == nil)
    }

    @Test(arguments: ["", "garbage", "<unclosed; rel=next", "rel=next", "</p2>", "</p2>; rel"])
    func garbageHasNoNextTarget(_ value: String) {
        #expect(nextLink(in: [value]) == nil)
    }

    @Test func anEmptyTargetIsGivenAsWritten() {
        // A reference to the page itself: the walk's visited set is what stops it.
        #expect(nextLink(in: [#"<>; rel="next""#]) == "")
    }
}

@Suite struct HTTPDateTests {
    /// 1994-11-06T08:49:37Z, the RFC's own example.
    private let example = Date(timeIntervalSince1970: 784_111_777)

    @Test(arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
        "Sunday, 06-Nov-94 08:49:37 GMT",  // RFC 850
        "Sun Nov  6 08:49:37 1994",  // asctime
        "Sun Nov 6 08:49:37 1994",
        "Sun, 06 nov 1994 08:49:37 UTC",
    ])
    func everyFormOfTheSameInstant(_ text: String) {
        #expect(parseHTTPDate(text) == example)
    }

    @Test func twoDigitYearsAreTheNearestCentury() {
        #expect(parseHTTPDate("Thursday, 01-Jan-70 00:00:00 GMT") == Date(timeIntervalSince1970: 0))
        #expect(parseHTTPDate("Sunday, 01-Jan-69 00:00:00 GMT") == Date(timeIntervalSince1970: 3_124_224_000))
    }

    @Test(arguments: [
        "", "garbage", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Nov 99999999999999999999 08:49:37 GMT", "Sun, 06 Nov 10000 08:49:37 GMT",
        "Sun Nov  6 08:49:37", "Sun Nov  6 08:49:37 1994 GMT", "1994-11-06T08:49:37Z", "120",
    ])
    func garbageIsNoDate(_ text: String) {
        #expect(parseHTTPDate(text) == nil)
    }
}

@Suite struct RetryAfterTests {
    private let now = Date(timeIntervalSince1970: 784_111_777)

    @Test func secondsAreSeconds() {
        #expect(retryAfter("120", now: now) == .seconds(120))
        #expect(retryAfter(" 0 ", now: now) == .zero)
    }

    @Test func aLongWaitIsADayAtMost() {
        #expect(retryAfter("86401", now: now) == .seconds(86_400))
        #expect(retryAfter("99999999999999999999999", now: now) == .seconds(86_400), "digits past Int's range")
    }

    @Test func aDateIsTheTimeUntilItNeverLessThanNothing() {
        #expect(retryAfter("Sun, 06 Nov 1994 08:51:37 GMT", now: now) == .seconds(120))
        #expect(retryAfter("Sun Nov  6 08:49:38 1994", now: now) == .seconds(1))
        #expect(retryAfter("Sun, 06 Nov 1994 08:00:00 GMT", now: now) == .zero)
        #expect(retryAfter("Sun, 06 Nov 2094 08:00:00 GMT", now: now) == .seconds(86_400))
        #expect(retryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now: now.addingTimeInterval(-0.25)) == .milliseconds(250))
    }

    @Test(arguments: ["", "soon", "-5", "1.5", "5s", "+5", "0x10"])
    func anythingElseIsNoAdvice(_ text: String) {
        #expect(retryAfter(text, now: now) == nil)
    }
}

@Suite struct MediaTypeTests {
    @Test func theTypeWithoutParametersLowercased() {
        #expect(mediaType("Application/JSON; charset=utf-8") == "application/json")
        #expect(mediaType(" text/plain ") == "text/plain")
        #expect(mediaType(nil) == nil)
        #expect(mediaType("") == nil)
        #expect(mediaType("; charset=utf-8") == nil)
    }

    @Test func jsonTypes() {
        for type in ["application/json", "text/json", "application/vnd.github+json", "application/problem+json"] {
            #expect(isJSONMediaType(type), "\(type)")
        }
        for type in ["text/plain", "application/jsonp", "text/html", "application/json-seq"] {
            #expect(!isJSONMediaType(type), "\(type)")
        }
        #expect(!isJSONMediaType(nil))
    }
}

/// How long a server says its answer stays fresh (issue 29: the server's word is a floor under `refresh`).
@Suite struct ServerFreshnessTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let date = "Fri, 15 Jan 2027 08:00:00 GMT"  // 1_800_000_000

    static func fresh(_ headers: [(String, String)]) -> Duration? {
        serverFreshness(headers.map { (name: $0.0, value: $0.1) }, now: now)
    }

    @Test func maxAgeLessAgeAndSMaxAgeIgnored() {
        #expect(Self.fresh([("Cache-Control", "public, max-age=60")]) == .seconds(60))
        #expect(Self.fresh([("Cache-Control", "max-age=60"), ("Age", "15")]) == .seconds(45))
        #expect(Self.fresh([("Cache-Control", "max-age=10"), ("Age", "99")]) == .seconds(0))
        #expect(Self.fresh([("Cache-Control", "s-maxage=600")]) == nil)
        #expect(Self.fresh([("cache-control", "private, MAX-AGE=\"30\"")]) == .seconds(30))
        #expect(Self.fresh([("Cache-Control", "no-store")]) == nil)
    }

    @Test func expiresFromTheServersOwnDate() {
        // One hour after the server's Date, whatever this machine's clock says.
        let expires = "Fri, 15 Jan 2027 09:00:00 GMT"
        #expect(Self.fresh([("Date", Self.date), ("Expires", expires)]) == .seconds(3600))
        #expect(Self.fresh([("Date", Self.date), ("Expires", expires), ("Age", "600")]) == .seconds(3000))
        // max-age wins over Expires (RFC 9111).
        #expect(Self.fresh([("Date", Self.date), ("Expires", expires), ("Cache-Control", "max-age=5")]) == .seconds(5))
        // An Expires that is no date, or in the past: already stale.
        #expect(Self.fresh([("Expires", "0")]) == .seconds(0))
        #expect(Self.fresh([("Date", Self.date), ("Expires", "Thu, 01 Jan 1970 00:00:00 GMT")]) == .seconds(0))
    }

    @Test func pollIntervalAndTheLongestWins() {
        #expect(Self.fresh([("X-Poll-Interval", "60")]) == .seconds(60))
        #expect(Self.fresh([("X-Poll-Interval", "60"), ("Cache-Control", "max-age=120")]) == .seconds(120))
        #expect(Self.fresh([("X-Poll-Interval", "300"), ("Cache-Control", "max-age=60")]) == .seconds(300))
    }

    /// Bad input from a server: no advice, or a day at most; never a crash.
    @Test(arguments: [
        ("X-Poll-Interval", "-5"), ("X-Poll-Interval", "soon"), ("X-Poll-Interval", "1.5"), ("X-Poll-Interval", ""),
        ("Cache-Control", "max-age=-1"), ("Cache-Control", "max-age=abc"), ("Age", "-3"),
    ])
    func garbageIsNoAdvice(_ header: (String, String)) {
        #expect(Self.fresh([header]) == nil)
    }

    @Test func hugeValuesAreADay() {
        #expect(Self.fresh([("Cache-Control", "max-age=99999999999")]) == .seconds(86_400))
        #expect(Self.fresh([("X-Poll-Interval", "99999999999999999999999")]) == .seconds(86_400))
        #expect(Self.fresh([("Date", Self.date), ("Expires", "Fri, 01 Jan 9999 00:00:00 GMT")]) == .seconds(86_400))
    }
}

/// Header names compared in any case, as the freshness and rate-limit headers are read at every poll.
@Suite struct HeaderNameTests {
    @Test func anyCaseOfTheNameMatches() {
        #expect(isHeaderName("X-RateLimit-Remaining", "x-ratelimit-remaining"))
        #expect(isHeaderName("CACHE-CONTROL", "cache-control"))
        #expect(isHeaderName("age", "age"))
    }

    @Test func otherNamesDoNot() {
        #expect(!isHeaderName("Age2", "age"))
        #expect(!isHeaderName("Ag", "age"))
        #expect(!isHeaderName("", "age"))
        // Only letters fold: "-" and "\r" differ by 0x20 too ("\r" | 0x20 is "-").
        #expect(!isHeaderName("x\rratelimit", "x-ratelimit"))
        #expect(!isHeaderName("x-ratelimit", "x\rratelimit"))
        // Not ASCII: never a header name hammock reads ("K", the Kelvin sign, lowercases to "k").
        #expect(!isHeaderName("\u{212A}", "k"))
    }

    @Test func theHeadersOfAnAnswerAreReadInAnyCase() {
        let limits = RateLimitHeaders([(name: "X-RATELIMIT-REMAINING", value: "7"), (name: "Retry-After", value: "30")])
        #expect(limits.remaining == 7)
        #expect(limits.resetIn == .seconds(30))
        #expect(serverFreshness([(name: "CACHE-Control", value: "max-age=60"), (name: "AGE", value: "10")]) == .seconds(50))
    }
}
