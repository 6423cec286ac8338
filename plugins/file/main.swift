import Foundation
import Glibc
import HammockCore
import HammockJSON
import HammockPluginKit

/// The file plugin's own failure code, beside the common ones in `SourceError.Code`.
extension SourceError.Code {
    static let fileUnreadable = Self("fileUnreadable")
}

// hammock-plugin-file: the `file` kind. A load reads the file now; unless `watch: false`, the plugin also
// pushes the file's content whenever it changes (see FileWatcher for how changes are noticed).

await Plugin.run(kinds: ["file"], version: "0.1.0") { setup throws(InvalidOptions) in
    let options = try FileOptions(
        setup.options, home: ProcessInfo.processInfo.environment["HOME"],
        workingDirectory: FileManager.default.currentDirectoryPath)
    return FileSource(options: options, push: setup.push)
}

/// One configured file. Watching starts at configure time rather than at the first load, so a change made
/// between the two is not lost; the first push still waits for a change, because the engine loads every
/// source at start anyway.
final class FileSource: PluginSource {
    let options: FileOptions
    private let reader: ChangeFilter
    private let watchToken: Int?
    private let changes: AsyncStream<Void>.Continuation?
    private let pump: Task<Void, Never>?

    init(options: FileOptions, push: PushChannel) {
        self.options = options
        let reader = ChangeFilter(options: options)
        self.reader = reader
        guard options.watch else {
            watchToken = nil
            changes = nil
            pump = nil
            return
        }
        // Holding one pending signal is enough: whatever happened, the file is read once more, as it is then.
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        changes = continuation
        watchToken = FileWatcher.shared.watch(path: options.path, debounce: options.debounce) { continuation.yield() }
        pump = Task {
            for await _ in stream {
                switch await reader.readIfChanged() {
                case .newData(let content, _, _)?: await push.newData(content)
                case .error(let error)?: await push.error(error)
                case .notModified?, nil: break
                }
            }
        }
    }

    func load(_ request: PluginLoadRequest) async -> PluginLoadResult {
        await reader.read()
    }

    func stop() async {
        if let watchToken { FileWatcher.shared.unwatch(watchToken) }
        changes?.finish()
        await pump?.value
    }
}

/// Reads the file and remembers what the engine last got from it, so a save that leaves the bytes as they
/// were (an editor that writes twice, `touch`) is not a new update. An actor so that a load and a push
/// never interleave their read-and-remember.
actor ChangeFilter {
    let options: FileOptions
    private var delivered: Delivered?

    /// Raw bytes rather than parsed content: it is what "unchanged" means, and it is cheaper to compare.
    private enum Delivered: Equatable {
        case bytes([UInt8])
        case failure(SourceError)
    }

    init(options: FileOptions) { self.options = options }

    func read() -> PluginLoadResult {
        let (result, delivered) = readNow()
        if options.watch { self.delivered = delivered }
        return result
    }

    func readIfChanged() -> PluginLoadResult? {
        let (result, delivered) = readNow()
        guard delivered != self.delivered else { return nil }
        self.delivered = delivered
        return result
    }

    private func readNow() -> (PluginLoadResult, Delivered) {
        switch readFile(options.path, maxBytes: options.maxBytes) {
        case .failure(let error):
            return (.error(error), .failure(error))
        case .success(let bytes):
            switch parseContent(bytes, as: options.parse) {
            case .success(let content): return (.newData(content), .bytes(bytes))
            case .failure(let error): return (.error(error), .bytes(bytes))
            }
        }
    }
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
