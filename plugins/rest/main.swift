// hammock-plugin-rest: the `rest` kind. Each load is one HTTP request (or one per page with `paginate:`),
// through one HTTP client shared by every source of the process: connections are pooled and kept alive
// across sources and loads, HTTP/2 is used where the server offers it, and TLS trusts the system's roots.
import HammockPluginKit

let pluginVersion = "0.1.0"
let sharedClient = SharedHTTPClient()

await Plugin.run(
    kinds: ["rest"], version: pluginVersion,
    onShutdown: { await sharedClient.shutdown() }
) { (setup) throws(InvalidOptions) -> any PluginSource in
    RESTSource(id: setup.id, options: try RESTOptions(setup.options), client: sharedClient)
}
