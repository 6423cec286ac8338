import HammockCore
import HammockLogging
import Logging

/// Makes one loader per kind that the configuration uses: a plugin host, of a plugin built into hammock or
/// of a plugin process.
package enum LoaderFactory {
    package static func makeLoaders(
        for configuration: Configuration, resolver: PluginResolver, report: @escaping PluginHost.Report,
        logger: Logger, standardError: StandardError
    ) -> [Kind: PluginHost] {
        var loaders: [Kind: PluginHost] = [:]
        for kind in configuration.kinds {
            loaders[kind] = makeLoader(
                kind: kind, resolver: resolver, report: report, logger: logger, standardError: standardError)
        }
        return loaders
    }

    /// A built-in kind is served by hammock even when `plugins:` names a command for it.
    package static func origin(of kind: Kind, resolver: PluginResolver) -> PluginOrigin? {
        if BuiltInPlugins.kinds.contains(kind) { return .builtIn }
        return resolver.command(for: kind).map(PluginOrigin.command)
    }

    package static func makeLoader(
        kind: Kind, resolver: PluginResolver, report: @escaping PluginHost.Report, logger: Logger,
        standardError: StandardError
    ) -> PluginHost? {
        origin(of: kind, resolver: resolver).flatMap { origin in
            PluginHost(kind: kind, origin: origin, report: report, logger: logger, standardError: standardError)
        }
    }
}
