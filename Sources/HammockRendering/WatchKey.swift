/// A key `hammock watch` acts on, read from a terminal in raw mode.
public enum WatchKey: Sendable, Equatable {
    case up, down
    /// `r`: retry the selected row (its failing sources).
    case retry
    /// `l`: load the selected row again.
    case load
    case quit
    /// Ctrl-Z: the terminal's own suspend is off while the screen is drawn, so that hammock can put the
    /// terminal back before it stops, and take it again when it continues.
    case suspend

    /// The keys in `bytes` (one read from the terminal), in order; anything else is ignored. Arrows come as
    /// `ESC [ A` or, in the terminal's application mode, `ESC O A`.
    public static func parse(_ bytes: [UInt8]) -> [WatchKey] {
        var keys: [WatchKey] = []
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == 0x1B, index + 1 < bytes.count, bytes[index] == UInt8(ascii: "[") || bytes[index] == UInt8(ascii: "O") {
                switch bytes[index + 1] {
                case UInt8(ascii: "A"): keys.append(.up)
                case UInt8(ascii: "B"): keys.append(.down)
                default: break
                }
                index += 2
                continue
            }
            switch byte {
            case UInt8(ascii: "k"): keys.append(.up)
            case UInt8(ascii: "j"): keys.append(.down)
            case UInt8(ascii: "r"): keys.append(.retry)
            case UInt8(ascii: "l"): keys.append(.load)
            case UInt8(ascii: "q"), UInt8(ascii: "Q"): keys.append(.quit)
            case 0x1A: keys.append(.suspend)
            default: break
            }
        }
        return keys
    }
}
