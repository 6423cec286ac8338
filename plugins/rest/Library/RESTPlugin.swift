import HammockCore
import HammockJSON
import HammockPluginKit

/// The `rest` kind. Each load is one HTTP request (or one per page with `paginate:`), through one HTTP
/// client shared by every source of the plugin (`HTTP1Client`, HTTP/1.1): connections are pooled and kept
/// alive across sources and loads, TLS trusts the system's roots (or `SSL_CERT_FILE`'s), and the
/// environment's proxies (`http_proxy`, `https_proxy`, `no_proxy`) are used.
public enum RESTPlugin {
    /// The plugin, as its `main.swift` runs it, with an HTTP client of its own.
    public static var plugin: PluginDescription { plugin(client: SharedHTTPClient()) }

    /// The plugin, its sources loading through `client` (a test's own, to run the plugin in its process),
    /// which it shuts down once every source has stopped.
    static func plugin(client: SharedHTTPClient) -> PluginDescription {
        let limits = RateLimits()
        let tokens = OAuth2Tokens()
        return PluginDescription(
            kinds: kinds, version: version, templates: templates, optionsSchema: optionsSchema,
            onShutdown: { await client.shutdown() }
        ) { setup throws(OptionProblems) in
            let options = try RESTOptions(setup.options)
            if let oauth2 = options.oauth2 { tokens.register(oauth2) }
            return RESTSource(
                id: setup.id, options: options, client: client, limits: limits, tokens: tokens, loop: client.loop(),
                configuredURL: ParsedURL(options.url))
        }
    }

    public static let kinds = ["rest"]
    /// Its options, described for `hammock schema`.
    public static let optionsSchema: [String: JSONValue] = ["rest": RESTOptions.schema]
    public static let version = "0.1.0"
    /// The engine percent-encodes each value filled into `url:`, so a value cannot change the URL's path
    /// or query, nor climb its path with `..`.
    public static let templates = ["rest": TemplateRules(urlEncoded: [JSONPointer(tokens: ["url"])])]
}
