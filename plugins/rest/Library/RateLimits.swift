import FoundationEssentials
import HammockCore
import NIOHTTP1
import Synchronization

extension SourceError.Code {
    /// An origin's rate limit is used up: no request goes there before its reset.
    static let rateLimited = Self("rateLimited")
}

/// What an answer's headers say of its origin's rate limit: requests left, and how long until the count
/// resets. GitHub's `X-RateLimit-Remaining` and `X-RateLimit-Reset` (epoch seconds), the IETF draft's
/// `RateLimit-Remaining` and `RateLimit-Reset` (seconds from now), and `Retry-After`.
struct RateLimitHeaders: Equatable {
    var remaining: Int?
    /// Until the count resets (or the server asks to be asked again), at most a day; nil when not said.
    var resetIn: Duration?

    init(remaining: Int?, resetIn: Duration?) {
        self.remaining = remaining
        self.resetIn = resetIn
    }

    /// A reset named as a number this large is a time (epoch seconds), not a count of seconds.
    static let epochThreshold = 1_000_000_000

    init(_ headers: [(name: String, value: String)], now: Date = Date()) {
        func value(_ name: String) -> String? {
            headers.first { isHeaderName($0.name, name) }?.value.trimmingSpacesAndTabs()
        }
        func count(_ text: String?) -> Int? { text.flatMap(wholeNumber) }
        remaining = count(value("x-ratelimit-remaining")) ?? count(value("ratelimit-remaining"))
        var resets: [Duration] = []
        for name in ["x-ratelimit-reset", "ratelimit-reset"] {
            guard let number = count(value(name)) else { continue }
            // Epoch seconds (GitHub's), or seconds from now (the draft's, and some APIs' X- header).
            let seconds = number >= Self.epochThreshold ? Int(Double(number) - now.timeIntervalSince1970) : number
            resets.append(.seconds(min(max(seconds, 0), longestRetryAfter)))
        }
        if let text = value("retry-after"), let delay = retryAfter(text, now: now) { resets.append(delay) }
        resetIn = resets.max()
    }

    init(_ headers: HTTPHeaders, now: Date = Date()) {
        self.init(headers.map { (name: $0.name, value: $0.value) }, now: now)
    }
}

/// Every origin's rate limit as its answers told it, shared by all of the plugin's sources: an origin whose
/// count is used up is held (its sources' loads fail at once, saying until when, and ask no sooner), and one
/// whose count runs low has the rest spread over the time left.
final class RateLimits: Sendable {
    private struct Origin {
        var heldUntil: ContinuousClock.Instant?
        /// The sources that asked this origin, to share what is left between.
        var sources: Set<String> = []
    }

    private let origins = Mutex<[String: Origin]>([:])

    /// Why `source` may not ask `origin` now: the error its load ends with, or nil.
    func hold(_ origin: String, host: String, for source: String, now: ContinuousClock.Instant = .now) -> SourceError? {
        origins.withLock { origins in
            origins[origin, default: Origin()].sources.insert(source)
            guard let until = origins[origin]?.heldUntil, until > now else {
                origins[origin]?.heldUntil = nil
                return nil
            }
            return Self.exhausted(host, for: now.duration(to: until))
        }
    }

    /// Takes in what an answer from `origin` said. Returns how long `source` should wait before asking again
    /// to spread what is left (nil: no need), and, for a refused request, the error's hold.
    func record(_ limits: RateLimitHeaders, origin: String, now: ContinuousClock.Instant = .now) -> (spread: Duration?, heldFor: Duration?) {
        origins.withLock { origins in
            var state = origins[origin, default: Origin()]
            defer { origins[origin] = state }
            // Used up: no request left, and a time to wait for. (A 429 that says nothing of the count holds
            // its own source alone, through its `Retry-After`.)
            if limits.remaining == 0, let resetIn = limits.resetIn {
                state.heldUntil = now + resetIn
                return (resetIn, resetIn)
            }
            // Spread what is left: each of the origin's sources asks at most every (time left × sources ÷
            // requests left), so the count lasts until the reset.
            guard let remaining = limits.remaining, remaining > 0, let resetIn = limits.resetIn else { return (nil, nil) }
            let share = resetIn * max(state.sources.count, 1) / remaining
            return (share, nil)
        }
    }

    static func exhausted(_ host: String, for delay: Duration) -> SourceError {
        let until = Date().addingTimeInterval(Double(delay.milliseconds) / 1000)
        return SourceError(
            message: "the rate limit of \(host) is used up until \(Self.clock(until)); no request goes there before then",
            code: .rateLimited, retryAfter: delay, transient: true)
    }

    /// `14:05:09 UTC`.
    static func clock(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .gmt
        let parts = calendar.dateComponents([.hour, .minute, .second], from: date)
        func two(_ value: Int?) -> String { value.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "00" }
        return "\(two(parts.hour)):\(two(parts.minute)):\(two(parts.second)) UTC"
    }
}
