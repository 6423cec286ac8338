import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockLogging
import HammockSystem

/// The offline cache: each `cache: true` source's last content on disk, shown at once at the next start
/// (with origin `cache`) while the source loads afresh.
///
/// One file per source, replaced by writing a temporary file, syncing it and renaming it over the old one:
/// a rename is atomic, so a reader (the next start) sees the old content or the new, never a torn write,
/// whenever the engine is killed. Writes happen off the engine loop, in `run()`, the only writer, each on a
/// thread of its own (`fsync` blocks); when a source changes faster than the disk keeps up, only its
/// newest content is written.
///
/// What is stored is what the consumer was shown: content with every secret redacted, never the clear text.
actor CacheStore {
    let directory: URL
    private let secrets: Secrets
    private let warn: @Sendable (String) -> Void
    /// Where the files are read and written: one thread for every write of a run, not a thread a write.
    private let blocking = BlockingExecutor(name: "hammock.cache")
    private var pending: [SourceID: JSONValue?] = [:]
    /// Sources whose content could not be stored, said once each on stderr.
    private var warned: Set<SourceID> = []
    /// One element waits at most: "something is pending".
    private let saved: AsyncStream<Void>
    private let announce: AsyncStream<Void>.Continuation

    /// A cached content came through a 16 MiB protocol line: a file much larger is not one this store
    /// wrote, and reading it whole would only cost memory.
    static let maximumFileSize = 17 << 20

    /// `$HAMMOCK_CACHE_DIR`, else `$XDG_CACHE_HOME/hammock`, else `~/.cache/hammock`; inside it, one folder
    /// per configuration file, so two configurations with a source of the same name do not share it.
    init(
        configurationFile: String, secrets: Secrets = Secrets(), warn: @escaping @Sendable (String) -> Void = { _ in },
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        self.secrets = secrets
        self.warn = warn
        let base: URL
        if let explicit = environment["HAMMOCK_CACHE_DIR"], !explicit.isEmpty {
            base = URL(fileURLWithPath: explicit)
        } else if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty {
            base = URL(fileURLWithPath: xdg).appendingPathComponent("hammock")
        } else {
            base = URL(fileURLWithPath: environment["HOME"] ?? "/tmp").appendingPathComponent(".cache/hammock")
        }
        let absolute = URL(fileURLWithPath: configurationFile).standardizedFileURL.path
        directory = base.appendingPathComponent(fnv1a(absolute))
        (saved, announce) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// The cached content of each source that has some. Unreadable files are skipped, never fatal.
    nonisolated func restore(_ sources: [SourceID]) async -> [SourceID: JSONValue] {
        await blocking.run { [self] in readCacheFiles(sources) }
    }

    private nonisolated func readCacheFiles(_ sources: [SourceID]) -> [SourceID: JSONValue] {
        var restored: [SourceID: JSONValue] = [:]
        for source in sources {
            guard let bytes = readCacheFile(file(for: source).path),
                let value = try? JSONValue(parsing: bytes), let content = value["content"],
                // Another id's file (two long ids whose hashes met), or one written before ids were kept.
                value["id"].map({ $0 == .string(source.rawValue) }) ?? (source.rawValue.utf8.count <= Self.longestIDAsName)
            else { continue }
            restored[source] = content
        }
        return restored
    }

    /// The file's bytes, or nil when there is none to use: missing, a symlink (someone else's file), not a
    /// regular file, or larger than any content this store writes (then with a warning).
    private nonisolated func readCacheFile(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        guard Int(info.st_size) <= Self.maximumFileSize else {
            warn("ignoring the cache file \(path): \(info.st_size) bytes is more than a cached content can be")
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            offset += count
        }
        return Array(bytes[..<offset])
    }

    /// Queues the newest content of a source (`nil` forgets it).
    func save(_ source: SourceID, content: JSONValue?) {
        pending[source] = .some(content)
        announce.yield()
    }

    /// Writes what is saved, as it comes, until `finish()`; then what still waits, and returns.
    func run() async {
        for await _ in saved { await writePending() }
        await writePending()
    }

    /// No more saves: `run()` writes what waits and returns.
    nonisolated func finish() { announce.finish() }

    private func writePending() async {
        while let (source, content) = pending.first {
            pending[source] = nil
            let failure = await blocking.run { [self] in write(source, content) }
            // Once per source: a disk that stays full would otherwise say it at every change.
            if let failure, warned.insert(source).inserted {
                warn("the offline cache cannot store source \"\(source)\": \(failure); it will show no cached content at the next start")
            }
        }
    }

    /// Stores or forgets `source`'s content; what went wrong when it could not.
    private nonisolated func write(_ source: SourceID, _ content: JSONValue?) -> String? {
        let target = file(for: source)
        guard let content else {
            unlink(target.path)
            return nil
        }
        do {
            // Cached content is the user's data: readable by them alone, like the files it may come from.
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            return "cannot create \(directory.path): \(error)"
        }
        // The id goes in too: a long id's file is named by a hash, and only the id inside tells whose it is.
        var bytes = JSONValue.object(["id": .string(source.rawValue), "content": secrets.redactor.redact(content)]).jsonBytes
        bytes.append(UInt8(ascii: "\n"))
        let temporary = target.path + ".tmp"
        func failed(_ what: String) -> String { "\(what) \(temporary): \(String(cString: strerror(errno)))" }
        // A fresh file of our own every time: whatever stands at the temporary name (a file left by a killed
        // run, a symlink planted to make us write elsewhere) is removed, and O_EXCL | O_NOFOLLOW refuse to
        // open anything that appears there in between.
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return failed("cannot create") }
        var failure: String?
        do throws(SystemCallError) {
            try Descriptor.writeAll(bytes, to: descriptor)
        } catch {
            failure = "cannot write \(temporary): \(error)"
        }
        if failure == nil && fsync(descriptor) != 0 { failure = failed("cannot sync") }
        close(descriptor)
        if failure == nil && rename(temporary, target.path) != 0 { failure = failed("cannot rename") }
        if failure != nil { unlink(temporary) }
        return failure
    }

    /// Where `source`'s content is kept. An id is letters, digits, `_` and `-` of any length, and a file name
    /// at most 255 bytes: a long id (which made the store fail, saying nothing) goes under a hash of it,
    /// whose `~` no id holds, so it never meets a short id's file. The id inside the file tells whose it is.
    nonisolated func file(for id: SourceID) -> URL {
        let source = id.rawValue
        guard source.utf8.count > Self.longestIDAsName else { return directory.appendingPathComponent(source + ".json") }
        return directory.appendingPathComponent("~" + fnv1a(source) + fnv1a(source, basis: 0x6c62_272e_07bb_0142) + ".json")
    }

    /// Ids up to this many bytes name their file themselves (with `.json` and `.tmp`, well below 255).
    static let longestIDAsName = 200
}

/// A short, stable name for a path (FNV-1a, 64 bits, in hex without leading zeros, as the files already
/// written are named; another `basis` gives another hash).
private func fnv1a(_ text: String, basis: UInt64 = FNV1a.offsetBasis) -> String {
    String(FNV1a.hash(text, basis: basis), radix: 16)
}
