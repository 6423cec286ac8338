import Glibc

/// Writes all of `bytes` to `descriptor`, retrying an interrupted write; at the first failure (EPIPE: nobody
/// reads any more) the rest is dropped, since there is no one left to tell. For last words and logs that must
/// never stop their writer: a plugin's log line, hammock's own messages before the engine's stderr exists.
public func writeOrDrop(_ bytes: [UInt8], to descriptor: Int32) {
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, bytes.count - offset) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return }
        offset += written
    }
}
