import Glibc

extension Descriptor {
    /// What `descriptor` holds, read to its end (a file, a `/proc` file); nil when a read fails (EINTR is read
    /// again) or it holds more than `limit` bytes.
    public static func readAll(_ descriptor: Int32, limit: Int) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { return bytes }
            bytes += chunk.prefix(count)
            if bytes.count > limit { return nil }
        }
    }
}
