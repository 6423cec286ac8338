import Glibc

/// The fields of `/proc/PID/stat` that hammock reads: the one parser of it for the engine, the plugin kit and
/// the shell plugin.
public struct ProcessStat: Equatable, Sendable {
    /// R, S, D, Z, ...
    public var state: Character
    public var parent: pid_t
    public var group: pid_t
    /// When it started, in clock ticks since boot.
    public var startTime: UInt64

    public init(state: Character, parent: pid_t, group: pid_t, startTime: UInt64) {
        (self.state, self.parent, self.group, self.startTime) = (state, parent, group, startTime)
    }

    /// Reads `/proc/PID/stat`; nil when the process is gone (or was never there).
    public init?(pid: pid_t) {
        self.init(path: "/proc/\(pid)/stat")
    }

    /// Reads a `stat` file: `/proc/PID/stat`, or a thread's `/proc/PID/task/TID/stat`.
    public init?(path: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        // One read: the kernel makes the whole file at once, and it is far shorter than this.
        var buffer = [UInt8](repeating: 0, count: 1024)
        var count: Int
        repeat {
            count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        } while count < 0 && errno == EINTR
        guard count > 0 else { return nil }
        self.init(Array(buffer[..<count]))
    }

    /// Parses the text of a `stat` file.
    public init?(_ bytes: [UInt8]) {
        // The command name (field 2) may hold spaces and parentheses, even ") ", so it ends at the last `)`:
        // the fields after it hold neither.
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // After it: state (3), ppid (4), pgrp (5), ..., starttime (22).
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
        guard fields.count > 19, let state = fields[0].first, let parent = pid_t(fields[1]), let group = pid_t(fields[2]),
            let startTime = UInt64(fields[19])
        else { return nil }
        self.init(state: state, parent: parent, group: group, startTime: startTime)
    }

    /// Whether the process still runs: a zombie (Z) or a dead one (X) waits only to be reaped.
    public var isLive: Bool { state != "Z" && state != "X" }

    /// The children of this process now, from each of its threads' `/proc/self/task/TID/children` (a child
    /// is its spawning thread's; an orphan handed to a subreaper, any thread's): a snapshot that may miss a
    /// child that starts or is handed over meanwhile. Nil when the kernel does not keep these files
    /// (`CONFIG_PROC_CHILDREN`) or they cannot be read: then `allPIDs` is the way.
    public static func ownChildren() -> [pid_t]? {
        guard let threads = numberedEntries(of: "/proc/self/task") else { return nil }
        var children: [pid_t] = []
        for tid in threads {
            let descriptor = open("/proc/self/task/\(tid)/children", O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                if errno == ENOENT, access("/proc/self/task/\(tid)", F_OK) != 0 { continue }  // the thread ended
                return nil
            }
            defer { close(descriptor) }
            // A pid is at most 7 digits and a space: a million children's worth.
            guard let text = Descriptor.readAll(descriptor, limit: 8 << 20) else { return nil }
            for field in text.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\n") }) {
                if let pid = pid_t(String(decoding: field, as: UTF8.self)) { children.append(pid) }
            }
        }
        return children
    }

    /// The pids of every process now, from the numeric entries of `/proc`: a snapshot that may name a process
    /// already gone (its `ProcessStat(pid:)` is then nil) and miss one just started. Nil when `/proc` cannot
    /// be read.
    public static func allPIDs() -> [pid_t]? {
        numberedEntries(of: "/proc")
    }

    /// The numbers that name entries of `folder` (`/proc`'s processes, a process's threads); nil when it
    /// cannot be read.
    private static func numberedEntries(of folder: String) -> [pid_t]? {
        guard let directory = opendir(folder) else { return nil }
        defer { closedir(directory) }
        var numbers: [pid_t] = []
        while let entry = readdir(directory) {
            let number = withUnsafeBytes(of: entry.pointee.d_name) { raw -> pid_t? in
                let name = raw.prefix { $0 != 0 }
                guard let first = name.first, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") else { return nil }
                return pid_t(String(decoding: name, as: UTF8.self))
            }
            if let number { numbers.append(number) }
        }
        return numbers
    }
}
