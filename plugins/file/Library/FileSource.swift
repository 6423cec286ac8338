import HammockCore
import HammockJSON
import HammockPluginKit
import HammockSystem

/// One configured file. Watching starts at configure time rather than at the first load, so a change made
/// between the two is not lost; the first push still waits for a change, because the engine loads every
/// source at start anyway.
final class FileSource: PluginSource {
    let options: FileOptions
    private let reader: ChangeFilter
    /// The plugin's, shared by all its sources (one inotify instance and thread for the process).
    private let watcher: FileWatcher
    private let watchToken: Int?
    private let changes: AsyncStream<Void>.Continuation?
    private let pump: Task<Void, Never>?

    init(options: FileOptions, push: PushChannel, watcher: FileWatcher) {
        self.options = options
        self.watcher = watcher
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
        watchToken = watcher.watch(path: options.path, debounce: options.debounce) { continuation.yield() }
        // Unstructured: it outlives `init`, for the source's life. `stop()` finishes its stream and awaits it.
        pump = Task {
            for await _ in stream {
                switch await reader.readIfChanged() {
                case .described(.newData(let content, _, _), let meta)?: await push.newData(content, meta: meta)
                case .newData(let content, _, _)?: await push.newData(content)
                case .error(let error)?: await push.error(error)
                case .notModified?, .fresh?, .described?, .notStored?, nil: break
                }
            }
        }
    }

    func load(_ request: PluginLoadRequest) async -> PluginLoadResult {
        await reader.read()
    }

    func stop() async {
        if let watchToken { watcher.unwatch(watchToken) }
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
        switch readFileAndTime(options.path, maxBytes: options.maxBytes) {
        case .failure(let error):
            return (.error(error), .failure(error))
        case .success(let file):
            switch parseContent(file.bytes, as: options.parse) {
            case .success(let content): return (PluginLoadResult.newData(content).meta(Self.meta(of: file)), .bytes(file.bytes))
            case .failure(let error): return (.error(error), .bytes(file.bytes))
            }
        }
    }

    /// A file source's `meta`: its size in bytes and, when the file says, its modification time.
    static func meta(of file: FileRead) -> JSONObject {
        var meta: JSONObject = ["size": .number(JSONNumber(file.bytes.count))]
        if let modified = file.modified { meta["modified"] = .string(modified.rfc3339) }
        return meta
    }
}
