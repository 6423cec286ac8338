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
            if kind == "fake" {
                loaders[kind] = FakeLoader(inbox: inbox)
            } else if let command = resolver.command(for: kind) {
                loaders[kind] = PluginHost(
                    kind: kind, command: command, inbox: inbox, logger: logger, standardError: standardError)
            }
        }
        return loaders
    }
}
