import HammockCore
import HammockJSON
import HammockPluginKit

/// The `rest` kind. Each load is one HTTP request (or one per page with `paginate:`), through one HTTP
/// client shared by every source of the process: connections are pooled and kept alive across sources and
/// loads, HTTP/2 is used where the server offers it, and TLS trusts the system's roots.
public enum RESTPlugin {
    /// The plugin, as its `main.swift` runs it.
    public static let plugin = PluginDescription(
        kinds: kinds, version: version, templates: templates, optionsSchema: optionsSchema, onShutdown: shutdown, makeSource: makeSource)

    public static let kinds = ["rest"]
    /// Its options, described for `hammock schema`.
    public static let optionsSchema: [String: JSONValue] = ["rest": RESTOptions.schema]
    public static let version = "0.1.0"
    /// The engine percent-encodes each value filled into `url:`, so a value cannot change the URL's path
    /// or query, nor climb its path with `..`.
    public static let templates = ["rest": TemplateRules(urlEncoded: [JSONPointer(tokens: ["url"])])]
    static let client = SharedHTTPClient()

    public static func makeSource(_ setup: SourceSetup) throws(OptionProblems) -> any PluginSource {
        RESTSource(id: setup.id, options: try RESTOptions(setup.options), client: client, loop: client.loop())
    }

    /// Closes the shared client, once every source has stopped.
    public static func shutdown() async {
        await client.shutdown()
    }
}
