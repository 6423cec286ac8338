import HammockCore

/// Which plugin serves a kind: one built into hammock, or a plugin process the resolver finds. The engine's
/// `PluginCatalog.system` makes the hosts from this, at start-up and on reloads alike.
package enum LoaderFactory {
    /// A built-in kind is served by hammock even when `plugins:` names a command for it.
    package static func origin(of kind: Kind, resolver: PluginResolver) -> PluginOrigin? {
        if BuiltInPlugins.kinds.contains(kind) { return .builtIn }
        return resolver.command(for: kind).map(PluginOrigin.command)
    }
}
