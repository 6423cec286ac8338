// A duration as a number of milliseconds, and as text: every message of hammock and its plugins writes a
// duration with `humanReadable`, in the units the configuration accepts, so one read from a message can be
// pasted back into a file.
extension Duration {
    /// Whole milliseconds, rounded toward zero; the engine's timers need no finer grain.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// `250ms`, `5s`, `2m`, `1h`, or combinations such as `1m30s`: the form the configuration accepts.
    public var humanReadable: String {
        var ms = milliseconds
        if ms == 0 { return "0s" }
        var text = ms < 0 ? "-" : ""
        ms = abs(ms)
        for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000), ("ms", 1)] where ms >= size {
            text += "\(ms / size)\(unit)"
            ms %= size
        }
        return text
    }
}
