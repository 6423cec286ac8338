import CHammockSystem
import FoundationEssentials
import Glibc
import HammockCore
import HammockLogging
import HammockProtocol
import HammockRendering
import HammockSystem
import Synchronization

/// `hammock watch`'s terminal: draws `WatchScreen` on stdout and reads keys from stdin.
///
/// The engine's lines only update the screen's model, so a terminal that is slow to draw (ssh on a bad
/// line) holds up nothing and nothing piles up: each frame shows the newest states. Frames are whole
/// screens, drawn at most ten times a second, and once a second without a change so that the ages move.
/// The terminal is put back (cbreak mode off, main screen, cursor shown) on every way out: `finish`, and an
/// `atexit` handler for an `exit` elsewhere.
///
/// A condition variable hands work to the drawing thread, which blocks in `write`: the screen's model and
/// what the threads share is a `State` in a `LockedCondition`, reached only with its lock held.
final class WatchTerminal: Sendable {
    private let secrets: Secrets
    private let style: WatchScreen.Style
    /// A key's command for the engine (`r`, `l`).
    private let act: @Sendable (ControlCommand) -> Void
    /// `q`.
    private let quit: @Sendable () -> Void
    private let stopReading = WakeupPipe()

    /// What the engine's task, the key reader, the drawing thread and `finish`'s wait share.
    private struct State {
        var screen: WatchScreen
        var isDirty = true
        var isClosing = false
        /// `run` switched the terminal and started drawing.
        var hasStarted = false
        var isEnded = false
        var endWaiter: CheckedContinuation<Void, Never>?
    }

    private let state: LockedCondition<State>

    init(
        title: String, sources: [SourceID], views: [ViewDefinition], secrets: Secrets,
        act: @escaping @Sendable (ControlCommand) -> Void, quit: @escaping @Sendable () -> Void
    ) {
        state = LockedCondition(State(screen: WatchScreen(title: title, sources: sources, views: views)))
        self.secrets = secrets
        self.act = act
        self.quit = quit
        style = WatchScreen.Style(colors: Self.terminalHasColors, unicode: Self.localeIsUTF8)
    }

    /// Colors only on a terminal that is not `dumb`, and not when NO_COLOR is set (no-color.org).
    static var terminalHasColors: Bool {
        let environment = ProcessInfo.processInfo.environment
        guard isatty(STDOUT_FILENO) == 1 else { return false }
        if let noColor = environment["NO_COLOR"], !noColor.isEmpty { return false }
        return (environment["TERM"] ?? "dumb") != "dumb"
    }

    /// The first of LC_ALL, LC_CTYPE, LANG that is set names the locale.
    static var localeIsUTF8: Bool {
        let environment = ProcessInfo.processInfo.environment
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"].lazy.compactMap { environment[$0] }.first { !$0.isEmpty } ?? ""
        let lowered = locale.lowercased()
        return lowered.contains("utf-8") || lowered.contains("utf8")
    }

    func run() async {
        guard start() else { return }
        await withCheckedContinuation { continuation in
            let hasEnded = state.withLock { state in
                if !state.isEnded { state.endWaiter = continuation }
                return state.isEnded
            }
            if hasEnded { continuation.resume() }
        }
    }

    /// Switches the terminal and starts drawing and reading keys, on threads of their own; false when a stop
    /// came first (`finish` before `run`), which must not leave the screen switched.
    func start() -> Bool {
        guard startDrawing() else { return false }
        OwnThread.start(named: "hammock.watch.draw") { [self] in
            drawFrames()
            TerminalMode.restore()
            end()
        }
        OwnThread.start(named: "hammock.watch.keys") { [self] in readKeys() }
        return true
    }

    /// Switches the terminal, unless the end came first.
    private func startDrawing() -> Bool {
        state.withLock { state in
            guard !state.isClosing && !state.isEnded else { return false }
            TerminalMode.enter()
            state.hasStarted = true
            return true
        }
    }

    private func end() {
        stopReading.wake()
        let waiter = state.withLock { state in
            state.isEnded = true
            defer { state.endWaiter = nil }
            return state.endWaiter
        }
        state.broadcast()
        waiter?.resume()
    }

    private func changed(_ change: (inout WatchScreen) -> Void) {
        state.withLock { state in
            change(&state.screen)
            state.isDirty = true
        }
        state.signal()
    }

    private func drawFrames() {
        var throttle = FrameThrottle()
        while true {
            // Sleeps until the next frame is due (asked again at each wake-up: a change brings it nearer),
            // then composes it with the lock held.
            let composed = state.withLock(
                when: { $0.isClosing || throttle.nextFrame(dirty: $0.isDirty, now: .current) <= .current },
                before: { MonotonicDeadline(throttle.nextFrame(dirty: $0.isDirty, now: .current)) }
            ) { state, _ -> [String]? in
                if state.isClosing { return nil }
                state.isDirty = false
                var size = (columns: Int32(80), rows: Int32(24))
                _ = hammock_terminal_size(STDOUT_FILENO, &size.columns, &size.rows)
                return state.screen.lines(
                    width: Int(size.columns), height: Int(size.rows), now: EngineTime.current.wall, style: style,
                    redactor: secrets.redactor)
            }
            guard let lines = composed else { return }
            throttle.drew(at: MonotonicInstant.current)
            // Home, each line cleared to its end, then everything below: a stray line on stderr is gone by the
            // next frame.
            let frame = "\u{1B}[H" + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n") + "\u{1B}[J"
            let written = (try? Descriptor.writeAll(Array(frame.utf8), to: STDOUT_FILENO)) != nil
            if !written {
                quit()  // the terminal is gone (a hung-up ssh): stop as a closed stdout does
                state.withLock(when: { $0.isClosing }) { _ in }
            }
        }
    }

    private func readKeys() {
        var buffer = [UInt8](repeating: 0, count: 64)
        var descriptors = [
            pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stopReading.readEnd, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&descriptors, 2, -1)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 || descriptors[1].revents != 0 { return }
            let count = read(STDIN_FILENO, &buffer, buffer.count)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return }  // no more keys: Ctrl-C and signals still stop hammock
            for key in WatchKey.parse(Array(buffer[..<count])) { handle(key) }
        }
    }

    private func handle(_ key: WatchKey) {
        switch key {
        case .up: changed { $0.move(by: -1) }
        case .down: changed { $0.move(by: 1) }
        case .retry, .load:
            let target = state.withLock { $0.screen.selected?.target }
            if let target { act(key == .retry ? .retry(target) : .load(target)) }
        case .quit:
            quit()
        case .suspend:
            suspend()
        }
    }

    /// Ctrl-Z: the shell's prompt gets the terminal as it was; `fg` gives the screen back, redrawn. Only
    /// hammock stops: its plugins go on, and their answers wait in the pipes.
    private func suspend() {
        state.withLock { state in  // no frame is composed meanwhile
            TerminalMode.restore()
            raise(SIGSTOP)
            TerminalMode.enter()
            state.isDirty = true
        }
        state.signal()
    }
}

extension WatchTerminal: EngineOutput {
    func send(_ line: OutputLine) {
        changed { $0.apply(line) }
    }

    func viewsReloaded(_ views: [ViewDefinition]) {
        changed { $0.update(views: views) }
    }

    func resized() {
        changed { _ in }
    }

    /// Stops drawing and puts the terminal back. Nothing waits to be shown: the screen goes away.
    func finish(with last: OutputLine?, deadline: Duration?) async -> OutputWriter.Completion {
        let timeout = deadline ?? .seconds(2)
        let done = await OwnThread.run(named: "hammock.watch.finish") { [self] in close(timeout: timeout) }
        return done ? .complete : .incomplete(unwritten: 0)
    }

    /// `finish`, blocking the calling thread: stops drawing and puts the terminal back. The drawing thread
    /// may be in a write to a terminal that does not read: waits for it up to `timeout`, then puts the
    /// terminal back all the same (false).
    func close(timeout: Duration) -> Bool {
        guard beginClosing() else {
            end()
            return true
        }
        let done = state.withLock(when: { $0.isEnded }, before: .after(timeout)) { _, isEnded in isEnded }
        if !done {
            TerminalMode.restore()
            end()
        }
        return done
    }

    /// No drawing starts from now on; returns whether it had started.
    private func beginClosing() -> Bool {
        defer { state.broadcast() }
        return state.withLock { state in
            state.isClosing = true
            return state.hasStarted
        }
    }

    func interrupt() {
        TerminalMode.restore()
        end()
    }

    func pause() {}
    func resume() {}
    func waitForRoomForAnswers() {}  // keys send commands without ids: no answer to wait for
}

/// The terminal's mode while `hammock watch` draws: cbreak (keys one by one, not echoed; Ctrl-C still sends
/// SIGINT, so a stop goes the usual way; Ctrl-Z comes as a key, `WatchKey.suspend`), the alternate screen, no
/// cursor. `restore` is idempotent and is also registered with `atexit`.
enum TerminalMode {
    private static let state = Mutex<termios?>(nil)
    private static let registersAtExit: Void = { atexit { TerminalMode.restore() } }()

    static func enter() {
        var saved = termios()
        if isatty(STDIN_FILENO) == 1, tcgetattr(STDIN_FILENO, &saved) == 0 {
            var raw = saved
            raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
            withUnsafeMutableBytes(of: &raw.c_cc) { cc in
                cc[Int(VMIN)] = 1
                cc[Int(VTIME)] = 0
                cc[Int(VSUSP)] = 0  // _POSIX_VDISABLE
            }
            _ = tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        }
        state.withLock { $0 = saved }
        registersAtExit
        write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[H\u{1B}[2J")
    }

    /// Puts back what `enter` changed, once.
    static func restore() {
        guard var saved = state.withLock({ current -> termios? in
            defer { current = nil }
            return current
        }) else { return }
        write("\u{1B}[0m\u{1B}[?25h\u{1B}[?1049l")
        if isatty(STDIN_FILENO) == 1 { _ = tcsetattr(STDIN_FILENO, TCSANOW, &saved) }
    }

    private static func write(_ text: String) {
        Descriptor.writeOrDrop(Array(text.utf8), to: STDOUT_FILENO)
    }
}
