import Glibc
import Synchronization

/// Tells watched sources that their file may have changed: at once when a writer has finished with it,
/// otherwise after the file has been quiet for a while.
///
/// One inotify instance and one thread serve the whole process: watches are cheap, descriptors and threads
/// are not, and a plugin may serve hundreds of files. Each source watches its file's *parent directory* for
/// the file's name rather than the file itself, because an inode watch dies with the inode: an editor's
/// atomic save (write a temporary file, rename it over the old one) or a delete and re-create would
/// silently end it. When the directory itself does not exist (yet), the nearest existing ancestor is
/// watched for the next missing component, and the watch moves down as the directories appear.
///
/// A path through symlinks is watched the same way at every step: the link's name in the link's directory,
/// then its target's name in the target's directory (see `PathChain`). Whenever a name on the way comes,
/// goes or is renamed, the way is resolved again and the watches follow it, so a re-pointed link (a
/// ConfigMap's `..data` swap included) is followed, and an edit of the target, wherever it lives, is seen.
///
/// A directory may also be watched for what it holds (`contents`): an entry that comes, goes, is renamed or
/// written, as hammock's `--watch-config` watches an included conf.d for its `*.yaml` files.
///
/// The thread blocks in `poll` on the inotify descriptor, with a timeout only while some debounce deadline
/// is pending, so an idle process costs no CPU. Used by the file plugin and by hammock itself (here in the
/// system layer, which both use: Glibc and `OwnThread` are all it needs), each with an instance of its own: no process-wide one, so that a test makes its
/// own and starts from nothing. Its thread starts with the first watch.
public final class FileWatcher: Sendable {
    /// A `Mutex`: the inotify thread and the sources' tasks each hold it for a few map updates, and the
    /// thread, blocked in `poll`, cannot await an actor.
    private let state: Mutex<State>

    /// - Parameter log: says when a change cannot be noticed (no inotify, a directory that cannot be watched).
    public init(log: @escaping @Sendable (String) -> Void) {
        state = Mutex(State(log: log))
    }

    /// Calls `changed` when the file at `path` may have changed; with `contents`, `path` is a directory and
    /// an entry in it whose name `contents` accepts counts as well.
    ///
    /// `changed` is called on the watcher's thread, with the watcher's lock held: it must only hand off
    /// (yield to a stream), never call back into the watcher or block.
    ///
    /// A file whose writer is done with it (closed, or renamed into place) is reported at once, unless
    /// `waitsForQuiet`: then every change waits for `debounce` of quiet, so that a burst of saves is reported
    /// once (a configuration, whose every report is a whole reload).
    public func watch(
        path: String, debounce: Duration, waitsForQuiet: Bool = false, contents: (@Sendable (String) -> Bool)? = nil,
        changed: @escaping @Sendable () -> Void
    ) -> Int {
        let startThread = state.withLock { state -> Bool in
            let first = state.descriptor < 0 && !state.initFailed
            if first {
                state.descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
                if state.descriptor < 0 {
                    state.initFailed = true
                    state.log("cannot start inotify (\(String(cString: strerror(errno)))); watched files will not be noticed")
                }
            }
            return first && state.descriptor >= 0
        }
        if startThread {
            OwnThread.start(named: "file.inotify") { [self] in run() }
        }
        return state.withLock { state in
            let token = state.nextToken
            state.nextToken += 1
            state.subscriptions[token] = Subscription(
                path: path, debounce: debounce, waitsForQuiet: waitsForQuiet, contents: contents, changed: changed)
            state.arm(token)
            return token
        }
    }

    /// Takes effect at once: once this returns, `changed` is never called again for the token.
    public func unwatch(_ token: Int) {
        state.withLock { state in
            state.detach(token)
            state.subscriptions[token] = nil
        }
    }

    private func run() {
        let (descriptor, log) = state.withLock { ($0.descriptor, $0.log) }
        let capacity = 64 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let timeout = state.withLock { $0.pollTimeout(now: .now) }
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, timeout)
            if ready < 0 && errno != EINTR {
                log("inotify poll failed (\(String(cString: strerror(errno)))); watched files will not be noticed")
                return
            }
            if ready > 0 {
                while true {
                    let count = read(descriptor, buffer, capacity)
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }  // EAGAIN: drained
                    let events = Self.decode(UnsafeRawBufferPointer(start: buffer, count: count))
                    state.withLock { state in
                        for event in events { state.handle(event, now: .now) }
                    }
                }
            }
            state.withLock { $0.fireDue(now: .now) }
        }
    }

    struct Event {
        var watch: Int32
        var mask: UInt32
        var name: String
    }

    private static func decode(_ bytes: UnsafeRawBufferPointer) -> [Event] {
        let header = MemoryLayout<inotify_event>.size
        var events: [Event] = []
        var offset = 0
        while offset + header <= bytes.count {
            let watch = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameBytes = UnsafeRawBufferPointer(rebasing: bytes[(offset + header)..<min(offset + header + length, bytes.count)])
            let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
            events.append(Event(watch: watch, mask: mask, name: name))
            offset += header + length
        }
        return events
    }
}

private struct Subscription {
    /// What the user asked for: absolute and lexically normalised.
    let path: String
    let debounce: Duration
    /// Whether a finished file, too, waits for quiet (see `FileWatcher.watch`).
    let waitsForQuiet: Bool
    /// For a directory watched for what it holds: which of its entries count.
    let contents: (@Sendable (String) -> Bool)?
    let changed: @Sendable () -> Void
    /// Where the path leads now (see `PathChain`), each entry with its watch.
    var entries: [Entry] = []
    /// When to tell the source; pushed back by every event until the file is quiet.
    var deadline: ContinuousClock.Instant?
    var firstPendingEvent: ContinuousClock.Instant?
}

/// One directory entry the path passes through, and the watch that waits on it.
private struct Entry {
    let directory: String
    let name: String
    /// The inotify watch this entry hangs on (-1: none), on `watchedDirectory`, waiting for `awaitedName` in
    /// it: the entry itself, or the next missing directory on the way to it.
    var watch: Int32 = -1
    var watchedDirectory = ""
    var awaitedName = ""

    var watchesTarget: Bool { watchedDirectory == directory }

    /// The name of the entry that stands for a directory's contents: no entry is called "/".
    static let anyChild = "/"

    func awaits(_ name: String, contents: ((String) -> Bool)?) -> Bool {
        awaitedName == name || (awaitedName == Self.anyChild && contents?(name) == true)
    }
}

/// The directory entries a path passes through on its way to a file: every symlink followed, then the file
/// itself, each as (physical directory, name). A change to any of them can change what the path reads, so
/// all are watched: a link re-pointed, the `..data` link of a Kubernetes ConfigMap swapped for a new
/// folder, the target of a link edited in a directory of its own.
///
/// Resolved as the kernel resolves it (a link target's `..` is taken physically), with the kernel's limit
/// on links. A component that does not exist is taken literally, and its watch waits for it to appear.
private enum PathChain {
    static let maximumLinks = 40

    static func entries(along path: String) -> [(directory: String, name: String)] {
        var entries: [(directory: String, name: String)] = []
        var pending = Array(components(path).reversed())  // a stack: a link's target goes on top
        var directory = "/"
        var links = 0
        while let component = pending.popLast() {
            if component == "." { continue }
            if component == ".." {
                directory = parent(of: directory)
                continue
            }
            let candidate = directory == "/" ? "/" + component : directory + "/" + component
            if links < maximumLinks, let target = linkTarget(candidate) {
                links += 1
                entries.append((directory, component))
                if target.hasPrefix("/") { directory = "/" }
                pending += components(target).reversed()
            } else {
                if pending.isEmpty { entries.append((directory, component)) }
                directory = candidate
            }
        }
        return entries
    }

    private static func components(_ path: String) -> [String] {
        path.split(separator: "/").map(String.init)
    }

    private static func parent(of directory: String) -> String {
        guard let slash = directory.lastIndex(of: "/"), slash != directory.startIndex else { return "/" }
        return String(directory[..<slash])
    }

    /// nil when the path is not a symlink, or not there.
    private static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink(path, &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

private struct State {
    let log: @Sendable (String) -> Void
    var descriptor: Int32 = -1
    var initFailed = false
    var nextToken = 0
    var subscriptions: [Int: Subscription] = [:]
    /// Several sources, or several entries of one, may share a directory (inotify gives them the same
    /// watch); the watch goes only when the last of them does.
    var watchers: [Int32: Set<Int>] = [:]

    static let mask = UInt32(IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)
        | UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    /// Finds where the path leads now and watches every entry on the way. New watches are added before
    /// stale ones go: a directory that stays on the way keeps its watch (inotify hands back the same one),
    /// so no event of its is lost in between.
    mutating func arm(_ token: Int) {
        guard descriptor >= 0, var subscription = subscriptions[token] else { return }
        let stale = Set(subscription.entries.map(\.watch))
        var chain = PathChain.entries(along: subscription.path)
        if subscription.contents != nil, let last = chain.last {
            let directory = last.directory == "/" ? "/" + last.name : last.directory + "/" + last.name
            chain.append((directory, Entry.anyChild))
        }
        subscription.entries = chain.map { directory, name in
            var entry = Entry(directory: directory, name: name)
            arm(&entry, for: token, path: subscription.path)
            return entry
        }
        subscriptions[token] = subscription
        for watch in stale.subtracting(subscription.entries.map(\.watch)) { release(watch, from: token) }
    }

    /// Watches the entry's directory, or the nearest ancestor that exists.
    private mutating func arm(_ entry: inout Entry, for token: Int, path: String) {
        var directory = entry.directory
        var name = entry.name
        while true {
            let watch = inotify_add_watch(descriptor, directory, Self.mask)
            if watch >= 0 {
                entry.watch = watch
                entry.watchedDirectory = directory
                entry.awaitedName = name
                watchers[watch, default: []].insert(token)
                return
            }
            guard errno == ENOENT || errno == ENOTDIR, directory != "/" else {
                log(
                    "cannot watch \(directory) (\(String(cString: strerror(errno)))); changes to \(path) "
                        + "will not be noticed")
                return
            }
            let slash = directory.lastIndex(of: "/")!
            name = String(directory[directory.index(after: slash)...])
            directory = slash == directory.startIndex ? "/" : String(directory[..<slash])
        }
    }

    mutating func detach(_ token: Int) {
        guard let entries = subscriptions[token]?.entries else { return }
        subscriptions[token]?.entries = []
        for watch in Set(entries.map(\.watch)) { release(watch, from: token) }
    }

    private mutating func release(_ watch: Int32, from token: Int) {
        guard watch >= 0 else { return }
        watchers[watch]?.remove(token)
        if watchers[watch]?.isEmpty == true {
            watchers[watch] = nil
            inotify_rm_watch(descriptor, watch)  // fails harmlessly when the kernel already dropped it
        }
    }

    /// Events that say a writer is done with the file: closed after writing, or renamed into place (an
    /// atomic save). The file is complete now, so it is read at once; waiting for quiet would only add
    /// latency. Other events (a write still going on, a delete that a re-create may follow) wait for quiet.
    static let finished = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO)
    /// Events that may change where the path leads: a name on the way came, went or was renamed.
    static let namespace = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)

    mutating func schedule(_ token: Int, now: ContinuousClock.Instant, finished: Bool = false) {
        guard var subscription = subscriptions[token] else { return }
        if finished && !subscription.waitsForQuiet {
            subscription.deadline = now
            subscriptions[token] = subscription
            return
        }
        let first = subscription.firstPendingEvent ?? now
        // A file written without pause (a log) is never quiet; it still gets read now and then.
        let latest = first + max(.seconds(1), subscription.debounce * 10)
        subscription.firstPendingEvent = first
        subscription.deadline = min(now + subscription.debounce, latest)
        subscriptions[token] = subscription
    }

    mutating func handle(_ event: FileWatcher.Event, now: ContinuousClock.Instant) {
        if event.mask & UInt32(IN_Q_OVERFLOW) != 0 {
            // Events were lost: any file may have changed, any link been re-pointed.
            for token in Array(subscriptions.keys) {
                arm(token)
                schedule(token, now: now)
            }
            return
        }
        guard let tokens = watchers[event.watch] else { return }  // a watch we already let go of
        if event.mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 {
            // A watched directory is gone or elsewhere: find where the path leads now.
            for token in tokens {
                arm(token)
                schedule(token, now: now)
            }
            return
        }
        for token in tokens {
            let entries = subscriptions[token]?.entries ?? []
            let contents = subscriptions[token]?.contents
            let hits = entries.filter { $0.watch == event.watch && $0.awaits(event.name, contents: contents) }
            guard !hits.isEmpty else { continue }
            // A link re-pointed or a missing directory created changes the entries to watch. The file may
            // already be there (mkdir -p and a write are quicker than us), hence the read either way.
            if event.mask & Self.namespace != 0 { arm(token) }
            schedule(token, now: now, finished: event.mask & Self.finished != 0 && hits.contains(where: \.watchesTarget))
        }
    }

    /// Milliseconds until the nearest deadline, rounded up so an early wake-up never spins; -1 for none.
    func pollTimeout(now: ContinuousClock.Instant) -> Int32 {
        guard let nearest = subscriptions.values.compactMap(\.deadline).min() else { return -1 }
        let remaining = now.duration(to: nearest)
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    mutating func fireDue(now: ContinuousClock.Instant) {
        for (token, subscription) in subscriptions {
            guard let deadline = subscription.deadline, deadline <= now else { continue }
            subscriptions[token]?.deadline = nil
            subscriptions[token]?.firstPendingEvent = nil
            subscription.changed()
        }
    }
}
