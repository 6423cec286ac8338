import ArgumentParser
import Glibc
import HammockPluginHost
import HammockSystem

/// `hammock mcp CONFIG`: goes on as `hammock-mcp` (Sources/hammock-mcp), the Model Context Protocol server
/// over the configuration's shared engine, a program of its own because the MCP SDK needs Foundation.
struct MCP: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mcp",
        abstract: "Serve a configuration's sources and views to an AI agent over the Model Context Protocol (stdio).",
        discussion: """
            An agent's MCP configuration runs `hammock mcp CONFIG`: a resource per source and view \
            (hammock://source/ID, hammock://view/ID: the state as JSON, with subscriptions) and a tool per \
            control op (get, load, loadIfNeeded, retry, override, wipe), each answered once hammock \
            acknowledged it. It reads the configuration's shared engine, as `hammock attach` does, and starts \
            it when none runs. See docs/mcp.md.
            """)

    @Argument(
        parsing: .captureForPassthrough,
        help: "CONFIG, then hammock-mcp's options: --socket PATH (the engine's socket), --no-start (fail when no engine runs).")
    var arguments: [String] = []

    static let programName = "hammock-mcp"

    func run() throws {
        guard let directory = PluginResolver.currentExecutableDirectory,
            let program = PluginResolver.companionPaths(Self.programName, executableDirectory: directory).first(where: { access($0, X_OK) == 0 })
        else {
            throw usageError("hammock mcp runs \(Self.programName), which is not beside hammock nor in its ../libexec/hammock (swift build builds it; scripts/install installs it)")
        }
        // hammock-mcp attaches through this hammock, wherever it was installed.
        if let own = PluginResolver.currentExecutablePath { setenv("HAMMOCK_BIN", own, 1) }
        let failure = ProcessImage.replace(with: program, arguments: [program] + arguments)
        throw usageError("cannot start \(program): \(failure)")
    }
}
