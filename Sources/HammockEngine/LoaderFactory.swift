import HammockConfig
import HammockCore
import Logging

/// Makes one loader per kind that the configuration uses: the built-in `fake`, or a plugin host.
enum LoaderFactory {
    static func makeLoaders(
        for configuration: Configuration, resolver: PluginResolver, inbox: EngineInbox, logger: Logger,
        standardError: StandardError
    ) -> [String: any SourceLoader] {
        var loaders: [String: any SourceLoader] = [:]
        for kind in configuration.kinds {
            loaders[kind] = makeLoader(
                kind: kind, resolver: resolver, inbox: inbox, logger: logger, standardError: standardError)
        }
        return loaders
    }

    static func makeLoader(
        kind: String, resolver: PluginResolver, inbox: EngineInbox, logger: Logger, standardError: StandardError
    ) -> (any SourceLoader)? {
        if kind == "fake" { return FakeLoader(inbox: inbox) }
        guard let command = resolver.command(for: kind) else { return nil }
        return PluginHost(kind: kind, command: command, inbox: inbox, logger: logger, standardError: standardError)
    }
}
