import Foundation
import Glibc
import HammockPluginKit
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
/// The thread blocks in `poll` on the inotify descriptor, with a timeout only while some debounce deadline
/// is pending, so an idle plugin costs no CPU.
final class FileWatcher: Sendable {
    static let shared = FileWatcher()

    private let state = Mutex(State())

    /// `changed` is called on the watcher's thread, with the watcher's lock held: it must only hand off
    /// (yield to a stream), never call back into the watcher or block.
    func watch(path: String, debounce: Duration, changed: @escaping @Sendable () -> Void) -> Int {
        let startThread = state.withLock { state -> Bool in
            let first = state.descriptor < 0 && !state.initFailed
            if first {
                state.descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
                if state.descriptor < 0 {
                    state.initFailed = true
                    pluginLog("cannot start inotify (\(String(cString: strerror(errno)))); watched files will not be noticed")
                }
            }
            return first && state.descriptor >= 0
        }
        if startThread {
            let thread = Thread { [self] in run() }
            thread.name = "file.inotify"
            thread.start()
        }
        return state.withLock { state in
            let token = state.nextToken
            state.nextToken += 1
            let slash = path.lastIndex(of: "/")!
            let directory = slash == path.startIndex ? "/" : String(path[..<slash])
            state.subscriptions[token] = Subscription(
                directory: directory, name: String(path[path.index(after: slash)...]), debounce: debounce,
                changed: changed)
            state.arm(token)
            return token
        }
    }

    /// Takes effect at once: once this returns, `changed` is never called again for the token.
    func unwatch(_ token: Int) {
        state.withLock { state in
            state.detach(token)
            state.subscriptions[token] = nil
        }
    }

    private func run() {
        let descriptor = state.withLock { $0.descriptor }
        let capacity = 64 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let timeout = state.withLock { $0.pollTimeout(now: .now) }
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, timeout)
            if ready < 0 && errno != EINTR {
                pluginLog("inotify poll failed (\(String(cString: strerror(errno)))); watched files will not be noticed")
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
    /// The file's directory and name: what the user asked for.
    let directory: String
    let name: String
    let debounce: Duration
    let changed: @Sendable () -> Void
    /// The inotify watch this subscription hangs on (-1: none), on `watchedDirectory`, waiting for
    /// `awaitedName` in it: the file itself, or the next missing directory on the way to it.
    var watch: Int32 = -1
    var watchedDirectory = ""
    var awaitedName = ""
    /// When to tell the source; pushed back by every event until the file is quiet.
    var deadline: ContinuousClock.Instant?
    var firstPendingEvent: ContinuousClock.Instant?

    var watchesTarget: Bool { watchedDirectory == directory }
}

private struct State {
    var descriptor: Int32 = -1
    var initFailed = false
    var nextToken = 0
    var subscriptions: [Int: Subscription] = [:]
    /// Several sources may share a directory (inotify gives them the same watch); the watch goes only
    /// when the last of them does.
    var watchers: [Int32: Set<Int>] = [:]

    static let mask = UInt32(IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)
        | UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    /// Watches the file's directory, or the nearest ancestor that exists.
    mutating func arm(_ token: Int) {
        guard descriptor >= 0, var subscription = subscriptions[token] else { return }
        var directory = subscription.directory
        var name = subscription.name
        while true {
            let watch = inotify_add_watch(descriptor, directory, Self.mask)
            if watch >= 0 {
                subscription.watch = watch
                subscription.watchedDirectory = directory
                subscription.awaitedName = name
                watchers[watch, default: []].insert(token)
                break
            }
            guard errno == ENOENT || errno == ENOTDIR, directory != "/" else {
                pluginLog(
                    "cannot watch \(directory) (\(String(cString: strerror(errno)))); changes to "
                        + "\(subscription.directory)/\(subscription.name) will not be noticed")
                subscription.watch = -1
                break
            }
            let slash = directory.lastIndex(of: "/")!
            name = String(directory[directory.index(after: slash)...])
            directory = slash == directory.startIndex ? "/" : String(directory[..<slash])
        }
        subscriptions[token] = subscription
    }

    mutating func detach(_ token: Int) {
        guard let watch = subscriptions[token]?.watch, watch >= 0 else { return }
        subscriptions[token]?.watch = -1
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

    mutating func schedule(_ token: Int, now: ContinuousClock.Instant, finished: Bool = false) {
        guard var subscription = subscriptions[token] else { return }
        if finished {
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
            // Events were lost: any file may have changed.
            for token in subscriptions.keys { schedule(token, now: now) }
            return
        }
        guard let tokens = watchers[event.watch] else { return }  // a watch we already let go of
        if event.mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 {
            // The watched directory is gone or elsewhere: find where the path leads now.
            for token in tokens {
                detach(token)
                arm(token)
                schedule(token, now: now)
            }
            return
        }
        for token in tokens where subscriptions[token]?.awaitedName == event.name {
            if subscriptions[token]?.watchesTarget == false {
                // A missing directory appeared: move the watch down. The file may already be inside
                // (mkdir -p and a write are quicker than us), hence the check either way.
                detach(token)
                arm(token)
            }
            schedule(token, now: now, finished: event.mask & Self.finished != 0 && subscriptions[token]?.watchesTarget == true)
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
