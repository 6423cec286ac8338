import FoundationEssentials
import HammockConfig
import HammockSystem
import Logging

/// `hammock run --watch-config`: a change to any file the configuration was read from asks for a reload,
/// exactly as SIGHUP does.
///
/// Each file is watched through its parent directory and matched by name (HammockSystem's `FileWatcher`),
/// so an editor's atomic save (a temporary file renamed over the old one) is seen; an included directory is
/// watched for its `*.yaml` files coming, going and changing. A burst of events (an editor writes, renames
/// and touches) is one reload: the watcher waits for quiet, and a reload asked for while one runs is run
/// once after it.
struct ConfigurationWatch {
    static let debounce = Duration.milliseconds(150)

    private let watcher: FileWatcher
    private let inbox: EngineInbox
    private var tokens: [Watched: Int] = [:]

    private struct Watched: Hashable {
        var path: String
        var isDirectory: Bool
    }

    init(inbox: EngineInbox, logger: Logger) {
        self.inbox = inbox
        watcher = FileWatcher(log: { logger.warning("--watch-config: \($0)") })
    }

    /// Watches exactly `files` (the union of the given sets): new paths are watched before old ones are let
    /// go, so a file that stays is never unwatched in between.
    mutating func follow(_ files: [ConfigurationFiles]) {
        var wanted = Set<Watched>()
        for set in files {
            wanted.formUnion(set.files.map { Watched(path: Self.absolute($0), isDirectory: false) })
            wanted.formUnion(set.directories.map { Watched(path: Self.absolute($0), isDirectory: true) })
        }
        let inbox = inbox
        for watched in wanted where tokens[watched] == nil {
            var contents: (@Sendable (String) -> Bool)?
            if watched.isDirectory { contents = Self.isIncluded }
            tokens[watched] = watcher.watch(
                path: watched.path, debounce: Self.debounce, waitsForQuiet: true, contents: contents,
                changed: { inbox.yield(.reload) })
        }
        for (watched, token) in tokens where !wanted.contains(watched) {
            watcher.unwatch(token)
            tokens[watched] = nil
        }
    }

    /// The names an included directory's include takes (`ConfigurationReader.collect`).
    @Sendable private static func isIncluded(_ name: String) -> Bool {
        name.hasSuffix(".yaml") && !name.hasPrefix(".")
    }

    /// The watcher takes absolute, lexically normal paths.
    private static func absolute(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.path
    }
}
