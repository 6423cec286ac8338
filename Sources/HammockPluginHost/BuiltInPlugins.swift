import HammockCore
import HammockFakePlugin
import HammockJSON
import HammockPluginKit

/// The kinds hammock serves itself, each a HammockPluginKit plugin run in hammock's own process
/// (`InProcessTransport`): available wherever hammock is, whatever `plugins:` and the search path hold.
public enum BuiltInPlugins {
    /// The plugins hammock serves itself, each the very `PluginDescription` its own executable would run.
    static let plugins: [PluginDescription] = [FakePlugin.plugin]
    /// The plugin kit's descriptions name their kinds as the protocol's text.
    public static let kinds: Set<Kind> = Set(plugins.flatMap(\.kinds).map { Kind($0) })
    /// What each built-in kind's hello says of its options, for `hammock schema`.
    public static let optionsSchema: [String: JSONValue] = plugins.reduce(into: [:]) { $0.merge($1.optionsSchema) { a, _ in a } }

    /// What serves `kind` inside hammock, or nil when it is not a built-in kind.
    static func serve(_ kind: Kind) -> InProcessTransport.Serve? {
        guard let plugin = plugins.first(where: { $0.kinds.contains(kind.rawValue) }) else { return nil }
        return { input, writeLine in await Plugin.serve(plugin, input: input, writeLine: writeLine) }
    }
}

/// What runs a kind's plugin; a reload keeps the running plugin of a kind only while this stays the same.
package enum PluginOrigin: Sendable, Equatable {
    /// Built into hammock (`BuiltInPlugins`).
    case builtIn
    /// A process started from this command below hammock's guard.
    case command([String])
}
