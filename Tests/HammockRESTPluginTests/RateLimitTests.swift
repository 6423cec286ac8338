import Foundation
import HammockCore
import Testing

@testable import HammockRESTPlugin

/// An origin's rate limit, as its answers tell it (issue 29).
@Suite struct RateLimitTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func limits(_ headers: [(String, String)]) -> RateLimitHeaders {
        RateLimitHeaders(headers.map { (name: $0.0, value: $0.1) }, now: now)
    }

    @Test func githubsEpochResetAndTheDraftsDelta() {
        let github = Self.limits([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "1800000090")])
        #expect(github == RateLimitHeaders(remaining: 0, resetIn: .seconds(90)))
        let draft = Self.limits([("RateLimit-Remaining", "12"), ("RateLimit-Reset", "30")])
        #expect(draft == RateLimitHeaders(remaining: 12, resetIn: .seconds(30)))
        let retry = Self.limits([("Retry-After", "7")])
        #expect(retry == RateLimitHeaders(remaining: nil, resetIn: .seconds(7)))
    }

    /// Bad input from a server: a reset in the past is now, one a year ahead is a day, garbage is nothing.
    @Test func resetsAreClampedAndGarbageIgnored() {
        #expect(Self.limits([("X-RateLimit-Reset", "1700000000")]).resetIn == .zero)
        #expect(Self.limits([("X-RateLimit-Reset", "1831536000")]).resetIn == .seconds(86_400))
        #expect(Self.limits([("RateLimit-Reset", "99999999999999999999")]).resetIn == .seconds(86_400))
        #expect(Self.limits([("X-RateLimit-Remaining", "-1"), ("X-RateLimit-Reset", "soon")]) == RateLimitHeaders(remaining: nil, resetIn: nil))
    }

    /// Broken on purpose (a used-up count not held), the second source's load was let through.
    @Test func aUsedUpCountHoldsEverySourceOfTheOriginUntilTheReset() {
        let limits = RateLimits()
        let start = ContinuousClock.now
        #expect(limits.hold("https://api:443", host: "api", for: "a", now: start) == nil)
        let recorded = limits.record(RateLimitHeaders(remaining: 0, resetIn: .seconds(60)), origin: "https://api:443", now: start)
        #expect(recorded.heldFor == .seconds(60))
        let held = limits.hold("https://api:443", host: "api", for: "b", now: start + .seconds(1))
        #expect(held?.code == .rateLimited && held?.retryAfter == .seconds(59) && held?.transient == true)
        #expect(held?.message.contains("the rate limit of api is used up until") == true)
        // Another origin is not held, and the reset ends the hold.
        #expect(limits.hold("https://other:443", host: "other", for: "c", now: start + .seconds(1)) == nil)
        #expect(limits.hold("https://api:443", host: "api", for: "a", now: start + .seconds(60)) == nil)
    }

    /// A 429 that says nothing of the count (only `Retry-After`) holds its own source, not the origin: the
    /// engine's retry of that source waits, and the origin's other sources go on.
    @Test func onlyAUsedUpCountHoldsTheOrigin() {
        #expect(RateLimits().record(RateLimitHeaders(remaining: nil, resetIn: .seconds(5)), origin: "o").heldFor == nil)
        #expect(RateLimits().record(RateLimitHeaders(remaining: 10, resetIn: .seconds(5)), origin: "o").heldFor == nil)
        #expect(RateLimits().record(RateLimitHeaders(remaining: 0, resetIn: nil), origin: "o").heldFor == nil)
        #expect(RateLimits().record(RateLimitHeaders(remaining: 0, resetIn: .seconds(5)), origin: "o").heldFor == .seconds(5))
    }

    @Test func whatIsLeftIsSpreadOverTheTimeLeftBetweenTheOriginsSources() {
        let limits = RateLimits()
        for source in ["a", "b", "c"] { _ = limits.hold("o", host: "o", for: source) }
        // 3 sources, 30 requests left, 10 minutes: each asks at most every minute.
        let spread = limits.record(RateLimitHeaders(remaining: 30, resetIn: .seconds(600)), origin: "o").spread
        #expect(spread == .seconds(60))
    }
}
