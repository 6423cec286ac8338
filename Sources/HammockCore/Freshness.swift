/// How eagerly a source is reloaded after an error.
public struct RetryPolicy: Sendable, Hashable {
    /// Whether the engine retries by itself. With `false` a failed source waits for the next poll
    /// (`refresh`) or an explicit `load`/`retry` from the consumer.
    public var isAutomatic: Bool
    /// The delay after the first failure; it doubles with each further one.
    public var initialDelay: Duration
    public var maximumDelay: Duration
    /// Which failures are retried by themselves: by default only those a retry can cure
    /// (`SourceError.isTransient`); `retry: {on: any}` retries every failure.
    public var retriesEveryError: Bool

    public init(
        isAutomatic: Bool = true, initialDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(60),
        retriesEveryError: Bool = false
    ) {
        self.isAutomatic = isAutomatic
        self.initialDelay = initialDelay
        self.maximumDelay = max(maximumDelay, initialDelay)
        self.retriesEveryError = retriesEveryError
    }

    /// Whether the engine retries `error` by itself.
    public func retries(_ error: SourceError) -> Bool {
        isAutomatic && (retriesEveryError || error.isTransient)
    }

    public static let standard = RetryPolicy()
    public static let off = RetryPolicy(isAutomatic: false)

    /// The delay before the next attempt after `failures` consecutive failures.
    ///
    /// Exponential backoff with jitter: the nominal delay doubles per failure up to the maximum, and the
    /// actual one is drawn between three quarters of it and all of it, so sources that failed together (a
    /// network outage) do not retry in lockstep. A `Retry-After` from the server is a floor under it.
    ///
    /// - Parameter unitRandom: a number in `0..<1`; the core draws it from its seeded generator.
    public func delay(afterFailures failures: Int, retryAfter: Duration?, unitRandom: Double) -> Duration {
        let doublings = min(max(failures - 1, 0), 32)
        let initial = Double(initialDelay.milliseconds)
        let nominal = min(initial * Double(1 << doublings), Double(maximumDelay.milliseconds))
        let jittered = Duration.milliseconds(Int64((nominal * (1 - 0.25 * unitRandom)).rounded()))
        // A server's delay is a floor, never a replacement: `Retry-After: 0` must not turn backoff off.
        guard let retryAfter else { return jittered }
        return max(jittered, min(retryAfter, Self.longestRetryAfter))
    }

    /// A `Retry-After` longer than this is taken as this: a day is plenty, and a larger number from outside
    /// must not overflow a deadline.
    public static let longestRetryAfter: Duration = .seconds(86_400)
    /// How long a server may say its answer stays fresh, at most (`Cache-Control: max-age=99999999999` is
    /// a day): the same bound as `longestRetryAfter`.
    public static let longestServerFloor: Duration = .seconds(86_400)
}

/// Siesta's freshness rule.
///
/// `isUpToDate = not invalidated and now - timestamp <= (latestError == nil ? expiration : retry delay)`,
/// with the age measured on the monotonic clock (`age` is `nil` when the source has no timestamp).
public func isUpToDate(
    _ state: SourceState, invalidated: Bool, expiration: Duration, retryDelay: Duration, age: Duration?
) -> Bool {
    guard !invalidated, state.timestamp != nil, let age else { return false }
    return age <= (state.latestError == nil ? expiration : retryDelay)
}

/// A small, fast, seedable generator (SplitMix64), so jitter is reproducible in tests.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
