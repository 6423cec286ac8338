import ArgumentParser
import Foundation
import HammockConfig
import HammockCore
import HammockEngine
import Logging

@main
struct Hammock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hammock",
        abstract: "Loads data sources declared in YAML, keeps them fresh, and writes every change as a JSON line.",
        discussion: """
            Run `hammock run CONFIG` as a subprocess and read its stdout: one JSON object per line, each \
            carrying the whole current state of a source or a view. Control lines may be written to its \
            stdin. See docs/protocol.md.
            """,
        version: hammockVersion,
        subcommands: [Run.self, Check.self, PluginCommand.self]
    )
}

/// Options shared by the commands that read a configuration.
struct ConfigurationArguments: ParsableArguments {
    @Argument(help: "The configuration file (YAML).", completion: .file(extensions: ["yaml", "yml"]))
    var config: String

    @Option(help: "Log level on stderr: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .notice

    /// Logs go to stderr only, with the configuration's secrets redacted.
    func makeLogger(secrets: Set<String>) -> Logger {
        let level = logLevel
        let output = StandardError(redactor: Redactor(secrets: secrets))
        LoggingSystem.bootstrap { _ in StandardErrorLogHandler(level: level, output: output) }
        return Logger(label: "hammock")
    }

    /// Loads the configuration, or prints every problem as `file:line:column: message` and exits 2.
    func load(resolver: PluginResolver) throws -> LoadedConfiguration {
        let loader = ConfigurationLoader(
            kindIsAvailable: { resolver.command(for: $0) != nil },
            pluginSearchDescription: { resolver.searchDescription(for: $0) })
        switch loader.load(file: config) {
        case .success(let loaded):
            return loaded
        case .failure(let error):
            report(error)
            throw ExitCode(2)
        }
    }

    /// Every problem on stderr as `file:line:column: message`, then a count.
    func report(_ error: ConfigurationError) {
        let count = error.diagnostics.count
        let text = error.description + "\n\(config): \(count) error\(count == 1 ? "" : "s")\n"
        FileHandle.standardError.write(Data(text.utf8))
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load the sources and write their states as JSON lines until stopped.")

    @OptionGroup var arguments: ConfigurationArguments

    @Flag(help: "Load every source once, write the states, then exit: 0 if no source failed, 1 otherwise.")
    var once = false

    @Option(help: "With --once: a source still loading after this long counts as failed (e.g. 30s, 2m).")
    var deadline: String = "30s"

    func run() async throws {
        let onceDeadline: Duration
        switch parseDuration(deadline) {
        case .success(let value): onceDeadline = value
        case .failure(let problem): throw ValidationError("--deadline: \(problem.message)")
        }
        let loaded = try arguments.load(resolver: PluginResolver())
        let logger = arguments.makeLogger(secrets: loaded.configuration.secrets)
        let engine = Engine(
            configuration: loaded, options: RunOptions(once: once, onceDeadline: onceDeadline), logger: logger,
            pluginResolver: PluginResolver(configured: loaded.configuration.plugins))
        // Plugins check their own options first, so a typo stops hammock with its line and column instead of
        // turning into a source error at run time. A plugin that fails to start is not a configuration
        // error: supervision restarts it and its sources show why.
        let validation = await engine.validatePlugins()
        if !validation.optionProblems.isEmpty {
            await engine.shutdownLoaders()
            arguments.report(ConfigurationError(file: loaded.file, diagnostics: validation.optionProblems))
            throw ExitCode(2)
        }
        for failure in validation.pluginFailures { logger.error("\(failure.formatted(file: loaded.file))") }
        let status = await engine.run()
        if status != 0 { throw ExitCode(status) }
    }
}

struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a configuration and print every problem as FILE:LINE:COLUMN: message.",
        discussion: "Exits 0 with a one-line summary when the configuration is valid, 2 when it is not.")

    @OptionGroup var arguments: ConfigurationArguments

    func run() async throws {
        let loaded = try arguments.load(resolver: PluginResolver())
        let logger = arguments.makeLogger(secrets: loaded.configuration.secrets)
        // Start the plugins the configuration needs, so that their own keys are checked too.
        let engine = Engine(
            configuration: loaded, options: RunOptions(), logger: logger,
            pluginResolver: PluginResolver(configured: loaded.configuration.plugins))
        let validation = await engine.validatePlugins()
        await engine.shutdownLoaders()
        let problems = validation.optionProblems + validation.pluginFailures
        if !problems.isEmpty {
            arguments.report(ConfigurationError(file: loaded.file, diagnostics: problems))
            throw ExitCode(2)
        }
        let configuration = loaded.configuration
        let kinds = configuration.kinds.joined(separator: ", ")
        print(
            "\(arguments.config): ok: \(configuration.sources.count) sources (\(kinds)), \(configuration.views.count) views"
        )
    }
}
