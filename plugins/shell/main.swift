// hammock-plugin-shell: the `shell` kind. Runs a command per load (`mode: poll`) or keeps one running and
// turns each line it prints into new content (`mode: stream`). Every command runs in a process group of its
// own, which the plugin ends as a whole on timeout, cancel, remove and shutdown.
import HammockPluginKit

await Plugin.run(kinds: ["shell"], version: "0.1.0") { (setup) throws(InvalidOptions) -> any PluginSource in
    let options = try ShellOptions(setup.options)
    switch options.mode {
    case .poll: return PollSource(options: options)
    case .stream: return StreamSource(options: options, push: setup.push)
    }
}
