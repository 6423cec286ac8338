import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// systemd's notify protocol, without libsystemd: each message is one datagram on the AF_UNIX socket named
/// by `NOTIFY_SOCKET` (a path, or `@name` for an abstract socket). What to say and when is
/// `ServiceNotifier`'s; this only sends.
///
/// `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` are removed from the environment once read, as
/// `sd_notify` does, so that plugins and the commands they run do not speak for hammock.
public final class NotifySocket: Sendable {
    private let descriptor: Int32
    private let address: sockaddr_un
    private let addressLength: socklen_t
    private let path: String
    private let logger: Logger
    /// Whether a failed send was reported already: one warning, then silence (systemd may be gone for good).
    private let hasWarned = Atomic<Bool>(false)

    /// How often the engine's loop must ping systemd's watchdog: half of `WATCHDOG_USEC`, when it is set and
    /// `WATCHDOG_PID` (when set) is hammock's, and never under `minimumWatchdogInterval`.
    public let watchdogInterval: Duration?

    /// The shortest time between two watchdog pings. `WATCHDOG_USEC=1` would otherwise have the engine's
    /// loop ping without pause (130% of a core); a watchdog of under 100 ms is a mistake, not a need.
    public static let minimumWatchdogInterval = Duration.milliseconds(50)

    /// nil when `NOTIFY_SOCKET` is unset or empty: nothing is sent, nothing else changes.
    public static func fromEnvironment(logger: Logger) -> NotifySocket? {
        let environment = ProcessInfo.processInfo.environment
        defer {
            unsetenv("NOTIFY_SOCKET")
            unsetenv("WATCHDOG_USEC")
            unsetenv("WATCHDOG_PID")
        }
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return nil }
        var interval: Duration?
        if let text = environment["WATCHDOG_USEC"], let microseconds = UInt64(text), microseconds > 0,
            environment["WATCHDOG_PID"].map({ Int32($0) == getpid() }) ?? true
        {
            let asked = Duration.microseconds(Int64(min(microseconds / 2, UInt64(Int64.max))))
            interval = max(asked, minimumWatchdogInterval)
            if asked < minimumWatchdogInterval {
                logger.warning(
                    "WATCHDOG_USEC=\(text) asks for a watchdog ping every \(microseconds / 2) µs; hammock pings at most every 50 ms, so systemd's WatchdogSec= should be 100ms or more")
            }
        }
        return NotifySocket(path: path, watchdogInterval: interval, logger: logger)
    }

    private init?(path: String, watchdogInterval: Duration?, logger: Logger) {
        self.path = path
        self.logger = logger
        self.watchdogInterval = watchdogInterval
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        // `@name` is an abstract socket: its name starts with a NUL byte instead.
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity || (bytes.first == 0 && bytes.count <= capacity) else {
            logger.warning("NOTIFY_SOCKET \"\(path)\" is longer than a socket's name may be; systemd will not hear from hammock")
            return nil
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        self.address = address
        addressLength = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (bytes.first == 0 ? 0 : 1))
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if descriptor < 0 {
            logger.warning("NOTIFY_SOCKET: no socket could be made (\(String(cString: strerror(errno)))); systemd will not hear from hammock")
            return nil
        }
    }

    deinit { close(descriptor) }

    /// Sends `message` (newline-separated `KEY=VALUE` fields) as one datagram, without blocking: a socket
    /// that refuses costs one warning, never the engine.
    public func send(_ message: String) {
        let bytes = Array(message.utf8)
        var address = address
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bytes.withUnsafeBytes { buffer in
                    sendto(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL), socketAddress, addressLength)
                }
            }
        }
        if sent < 0 && !hasWarned.exchange(true, ordering: .relaxed) {
            logger.warning("NOTIFY_SOCKET \"\(path)\" refused a message (\(String(cString: strerror(errno)))); systemd may not know hammock's state")
        }
    }

    /// CLOCK_MONOTONIC in microseconds, for `MONOTONIC_USEC`: systemd's own clock for reloads.
    public static var monotonicMicroseconds: UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }
}
