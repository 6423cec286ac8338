import Glibc
import HammockCore

/// The file plugin's own failure code, beside the common ones in `SourceError.Code`.
extension SourceError.Code {
    static let fileUnreadable = Self("fileUnreadable")
}

/// Reads at most `maxBytes + 1` bytes: the one extra byte is how a too-large file is told apart from one
/// exactly at the limit without trusting `st_size` (files in /proc report 0).
func readFile(_ path: String, maxBytes: Int) -> Result<[UInt8], SourceError> {
    readFileAndTime(path, maxBytes: maxBytes).map(\.bytes)
}

/// A file read whole (`readFile`), with its modification time as the open file said it (nil for one that
/// does not say, such as /proc's).
struct FileRead: Sendable {
    var bytes: [UInt8]
    var modified: Timestamp?
}

func readFileAndTime(_ path: String, maxBytes: Int) -> Result<FileRead, SourceError> {
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
    // Read straight into the result, in steps sized to the file: what its size says plus the byte that tells
    // a file grown since, or 4 KiB doubling for a file that says nothing (/proc reports 0). A buffer of the
    // whole limit up front (1 MiB, zeroed, for a 10-byte file) cost more than the read, and glibc kept its
    // pages: about 10 KiB of memory per watched file.
    let sizeHint = status.st_mode & S_IFMT == S_IFREG && status.st_size > 0 ? Int(status.st_size) + 1 : 4 << 10
    var step = min(sizeHint, 1 << 20)
    var bytes: [UInt8] = []
    bytes.reserveCapacity(min(step, maxBytes + 1))
    while bytes.count <= maxBytes {
        let wanted = min(step, maxBytes + 1 - bytes.count)
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: wanted))
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + start, wanted) }
        let failure = errno
        bytes.removeLast(wanted - max(count, 0))
        if count < 0 {
            if failure == EINTR { continue }
            return .failure(SourceError(message: "cannot read \(path): \(String(cString: strerror(failure)))", code: .fileUnreadable))
        }
        if count == 0 { break }
        step = min(step * 2, 1 << 20)
    }
    if bytes.count > maxBytes { return .failure(tooLarge(path, maxBytes)) }
    let modified =
        status.st_mtim.tv_sec > 0
        ? Timestamp(millisecondsSince1970: Int64(status.st_mtim.tv_sec) * 1000 + Int64(status.st_mtim.tv_nsec) / 1_000_000) : nil
    return .success(FileRead(bytes: bytes, modified: modified))
}

private func tooLarge(_ path: String, _ maxBytes: Int) -> SourceError {
    SourceError(message: "\(path) is larger than maxBytes (\(maxBytes) bytes)", code: .tooLarge)
}
