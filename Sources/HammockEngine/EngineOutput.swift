import HammockCore

/// Where the engine's output lines go: stdout as the protocol's lines or a bar's (`OutputWriter`), or a
/// person's screen (`WatchTerminal`). Either keeps only the newest state of each source and view while its
/// consumer is slow, so the engine never waits for it.
protocol EngineOutput: AnyObject, Sendable {
    func send(_ line: OutputLine)
    /// The lines of one turn of the engine, in order.
    func send(contentsOf lines: [OutputLine])
    /// Runs until `finish` is done (or the consumer is gone).
    func run() async
    /// Takes `last`, then waits for what remains to be shown, at most until `deadline` when there is one.
    func finish(with last: OutputLine?, deadline: Duration?) async -> OutputWriter.Completion
    /// Ends `finish`'s wait at once (a second stop signal).
    func interrupt()
    func pause()
    func resume()
    func viewsReloaded(_ views: [ViewDefinition])
    /// Blocks stdin's reader while answers to control lines have no room.
    func waitForRoomForAnswers()
    /// The terminal changed size (SIGWINCH).
    func resized()
    /// The engine took the consumer in with `subscription`, just before its `hello`: a client of the shared
    /// engine reads what is `publish`ed from now on.
    func joined(_ subscription: Subscription)
    /// The engine let the consumer go.
    func left()
}

extension EngineOutput {
    func send(contentsOf lines: [OutputLine]) {
        for line in lines { send(line) }
    }

    // stdout and the watch screen are handed every line they read (`send`).
    func joined(_ subscription: Subscription) {}
    func left() {}
}

extension OutputWriter: EngineOutput {
    func resized() {}  // lines have no width
}
