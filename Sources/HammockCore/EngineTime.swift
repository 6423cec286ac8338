/// A reading of the monotonic clock, in milliseconds from an arbitrary origin.
///
/// Every deadline and every age is one of these: stepping the wall clock (NTP, a laptop's first sync, a VM
/// restore) moves no poll, retry or timeout.
public struct MonotonicInstant: Sendable, Hashable, Comparable {
    public var milliseconds: Int64

    public init(milliseconds: Int64) { self.milliseconds = milliseconds }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.milliseconds < rhs.milliseconds }

    /// Saturates instead of trapping: a delay from outside (a `Retry-After`) must not crash the engine.
    public static func + (lhs: Self, rhs: Duration) -> Self {
        let (sum, overflow) = lhs.milliseconds.addingReportingOverflow(rhs.milliseconds)
        return Self(milliseconds: overflow ? (rhs > .zero ? .max : .min) : sum)
    }

    public static func - (lhs: Self, rhs: Self) -> Duration { .milliseconds(lhs.milliseconds &- rhs.milliseconds) }
}

/// The time as the core is told it: the monotonic clock for deadlines and ages, the wall clock for the
/// `timestamp` field alone.
public struct EngineTime: Sendable, Hashable {
    public var instant: MonotonicInstant
    public var wall: Timestamp

    public init(instant: MonotonicInstant, wall: Timestamp) {
        self.instant = instant
        self.wall = wall
    }
}
