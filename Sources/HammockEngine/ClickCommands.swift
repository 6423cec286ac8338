import HammockCore
import HammockLogging
import HammockPluginHost
import Logging

/// The `on-click` commands that are running. Each runs as a plugin does, below hammock's guard, so it dies
/// with hammock however hammock dies; its output goes to the log, never to stdout, which is the bar's.
/// A stop ends the ones still running rather than wait for them (a click may start something that runs on).
///
/// A click on a button whose command still runs is ignored: a scroll wheel sends dozens of clicks a second,
/// and each must not become a process.
actor ClickCommands {
    private struct ButtonOfView: Hashable {
        var view: ViewID
        var button: Int
    }
    /// At most one command per button of a view.
    private var running: [ButtonOfView: ProcessTransport] = [:]
    private var isStopped = false
    private let logger: Logger
    private let standardError: StandardError

    init(logger: Logger, standardError: StandardError) {
        self.logger = logger
        self.standardError = standardError
    }

    /// Runs `click.command` with `/bin/sh -c` to its end; nothing once `endAll` was called.
    func run(_ click: ClickCommand) async {
        guard !isStopped else { return }
        let prefix = "on-click of view \"\(click.view)\""
        let button = ButtonOfView(view: click.view, button: click.button)
        guard running[button] == nil else {
            logger.info("\(prefix): button \(click.button)'s command still runs; click ignored")
            return
        }
        let standardError = standardError
        let transport = ProcessTransport(
            command: ["/bin/sh", "-c", click.command], reapsOrphans: true,
            environment: ["HAMMOCK_VIEW": click.view.rawValue, "HAMMOCK_BUTTON": String(click.button)]
        ) { standardError.write(prefix: prefix, line: $0, field: "command") }
        transport.closeInput()
        running[button] = transport
        logger.info("\(prefix): running `\(click.command)` for button \(click.button)")
        let exit = await transport.run { pieces in
            for case .line(let line) in pieces { standardError.write(prefix: prefix, line: line, field: "command") }
        }
        running[button] = nil
        switch exit {
        case .exited(0): break
        case .killed where isStopped: break
        default: logger.warning("\(prefix): `\(click.command)` \(exit)")
        }
    }

    /// Ends every command still running (its guard ends what it started), and runs no more.
    func endAll() {
        isStopped = true
        for transport in running.values { transport.kill() }
    }
}
