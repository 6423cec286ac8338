import ArgumentParser
import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockRendering
import HammockSystem

struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the current state of a configuration's sources and views from its shared engine, and exit.",
        discussion: """
            For scripts, cron jobs and bars that run a command per interval (i3blocks, Waybar's `interval`): \
            JSON lines, one `source` or `view` line per id (--source and --view: just those; none: every one), \
            or with a bar format the rendered text of the views, one line.

            The state is the engine's now: an engine that has loaded prints at once. When none serves the \
            configuration, get starts one as `hammock attach` does (it lives on for --idle-exit, so the next \
            get finds it warm); its first states are loading then. With --no-start, an engine that was not \
            running is an error (exit 2). See docs/protocol.md, "The shared engine".
            """)

    @OptionGroup var address: EngineAddressArguments
    @OptionGroup var start: EngineStartArguments

    @Option(help: "What to print: the protocol's JSON lines (json), or a bar's line (waybar, polybar, text, tmux, i3bar).")
    var format = Parsed(StdoutFormat.json)

    @Option(help: "A view to print (a bar format: as `hammock run --view`).")
    var view: [String] = []

    @Option(help: "A source to print (JSON lines only).")
    var source: [String] = []

    static let subscribeID = "hammock-get"

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let format = try format.value { usageError("--format \($0)") }
        if format == .tui { throw usageError("--format tui draws a screen; `hammock watch` shows one") }
        if format != .json {
            if let problem = format.checkSelection(view.map { ViewID($0) }) { throw usageError(problem) }
            if !source.isEmpty { throw usageError("--source applies to --format json; a bar shows views (--view)") }
        }
        let (configuration, socket) = try address.resolve()
        let config = address.config
        let engineStart = EngineStart(start)
        let (views, sources) = (view, source)
        let outcome = await OwnThread.run(named: "hammock.get") {
            Result { () throws -> Int32 in
                let open = { try EngineConnection.open(config: config, configuration: configuration, socket: socket, start: engineStart) }
                let connection = try open()
                let named = !sources.isEmpty || !views.isEmpty
                if format == .json {
                    try connection.subscribe(sources: named ? sources : nil, views: named ? views : nil, id: Self.subscribeID)
                } else {
                    try connection.subscribe(sources: views.isEmpty ? nil : [], views: views.isEmpty ? nil : views, id: Self.subscribeID)
                }
                _ = try connection.readHello(configuration: configuration)
                // The snapshot, up to the subscribe's ack.
                let deadline = ContinuousClock.now + EngineConnection.helloTimeout
                snapshot: while true {
                    switch connection.next(before: deadline) {
                    case .timedOut, .end:
                        throw EngineConnection.clientError("the engine at \(socket) did not finish its snapshot", status: 1)
                    case .line(let bytes):
                        let line = (try? JSONValue(parsing: bytes)) ?? .null
                        switch line["type"]?.stringValue {
                        case "ack" where line["id"]?.stringValue == Self.subscribeID: break snapshot
                        case "source", "view": if format == .json && !writeLine(bytes) { return 0 }
                        default: continue
                        }
                    }
                }
                guard format != .json else { return 0 }
                // A bar's line: the engine renders the snapshot of the views first; i3bar's comes after its
                // header and `[`.
                let bar = try open()
                withExtendedLifetime(connection) {}
                try bar.subscribe(sources: [], views: views, format: format, id: nil)
                for index in 0..<(format == .i3bar ? 3 : 1) {
                    guard case .line(let line) = bar.next(before: deadline) else {
                        throw EngineConnection.clientError("the engine at \(socket) rendered nothing", status: 1)
                    }
                    if index == (format == .i3bar ? 2 : 0) {
                        var text = line
                        if format == .i3bar, text.last == UInt8(ascii: ",") { text.removeLast() }
                        _ = writeLine(text)
                        return 0
                    }
                }
                return 0
            }
        }
        let status = try outcome.get()
        if status != 0 { throw ExitCode(status) }
    }
}
