/// How eagerly a source is reloaded after an error.
public struct RetryPolicy: Sendable, Hashable {
    /// Whether the engine retries by itself. With `false` a failed source waits for the next poll
    /// (`refresh`) or an explicit `load`/`retry` from the consumer.
    public var isAutomatic: Bool
    /// The delay after the first failure; it doubles with each further one.
    public var initialDelay: Duration
    public var maximumDelay: Duration

    public init(isAutomatic: Bool = true, initialDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(60)) {
        self.isAutomatic = isAutomatic
        self.initialDelay = initialDelay
        self.maximumDelay = max(maximumDelay, initialDelay)
    }

    public static let standard = RetryPolicy()
    public static let off = RetryPolicy(isAutomatic: false)

    /// The delay before the next attempt after `failures` consecutive failures.
    ///
    /// Exponential backoff with jitter: the nominal delay doubles per failure up to the maximum, and the
    /// actual one is drawn between three quarters of it and all of it, so sources that failed together (a
    /// network outage) do not retry in lockstep. A `Retry-After` from the server wins over both.
    ///
    /// - Parameter unitRandom: a number in `0..<1`; the core draws it from its seeded generator.
    public func delay(afterFailures failures: Int, retryAfter: Duration?, unitRandom: Double) -> Duration {
        if let retryAfter { return max(retryAfter, .zero) }
        let doublings = min(max(failures - 1, 0), 32)
        let initial = Double(initialDelay.milliseconds)
        let nominal = min(initial * Double(1 << doublings), Double(maximumDelay.milliseconds))
        let jittered = nominal * (1 - 0.25 * unitRandom)
        return .milliseconds(Int64(jittered.rounded()))
    }
}

/// Siesta's freshness rule.
///
/// `isUpToDate = not invalidated and now - timestamp <= (latestError == nil ? expiration : retry delay)`.
public func isUpToDate(
    _ state: SourceState, invalidated: Bool, expiration: Duration, retryDelay: Duration, now: Timestamp
) -> Bool {
    guard !invalidated, let timestamp = state.timestamp else { return false }
    let age = now - timestamp
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
