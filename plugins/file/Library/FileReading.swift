import Glibc
import HammockCore

/// The file plugin's own failure code, beside the common ones in `SourceError.Code`.
extension SourceError.Code {
    static let fileUnreadable = Self("fileUnreadable")
}

/// Reads at most `maxBytes + 1` bytes: the one extra byte is how a too-large file is told apart from one
/// exactly at the limit without trusting `st_size` (files in /proc report 0).
func readFile(_ path: String, maxBytes: Int) -> Result<[UInt8], SourceError> {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard descriptor >= 0 else {
        let code = errno
        if code == ENOENT || code == ENOTDIR {
            return .failure(SourceError(message: "file not found: \(path)", code: .fileMissing))
        }
        return .failure(SourceError(message: "cannot open \(path): \(String(cString: strerror(code)))", code: .fileUnreadable))
    }
    defer { close(descriptor) }
    var status = stat()
    if fstat(descriptor, &status) == 0 {
        if status.st_mode & S_IFMT == S_IFDIR {
            return .failure(SourceError(message: "\(path) is a directory, not a file", code: .fileUnreadable))
        }
        if status.st_mode & S_IFMT == S_IFREG && Int(status.st_size) > maxBytes {
            return .failure(tooLarge(path, maxBytes))
        }
    }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: min(maxBytes + 1, 1 << 20))
    while bytes.count <= maxBytes {
        let wanted = min(chunk.count, maxBytes + 1 - bytes.count)
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, wanted) }
        if count < 0 {
            if errno == EINTR { continue }
            return .failure(SourceError(message: "cannot read \(path): \(String(cString: strerror(errno)))", code: .fileUnreadable))
        }
        if count == 0 { break }
        bytes.append(contentsOf: chunk[..<count])
    }
    if bytes.count > maxBytes { return .failure(tooLarge(path, maxBytes)) }
    return .success(bytes)
}

private func tooLarge(_ path: String, _ maxBytes: Int) -> SourceError {
    SourceError(message: "\(path) is larger than maxBytes (\(maxBytes) bytes)", code: .tooLarge)
}
