/// FNV-1a, 64 bits, over a text's UTF-8 bytes: small, and stable across runs, builds and machines (Swift's
/// `Hasher` is seeded per process), for names and tags that must come out the same next time (a cache
/// file's name, a list's validator). Not for secrets: it hides nothing.
public enum FNV1a {
    public static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325

    public static func hash(_ text: String, basis: UInt64 = offsetBasis) -> UInt64 {
        var hash = basis
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    /// The hash in hexadecimal, 16 digits.
    public static func hex(_ text: String, basis: UInt64 = offsetBasis) -> String {
        let digits = String(hash(text, basis: basis), radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
