import Glibc

/// The guard every plugin runs below: the `hammock-guard` program (Sources/hammock-guard/main.c), a small C
/// executable beside hammock's own (as `swift build` leaves it) or in `../libexec/hammock` from it (as
/// scripts/install and the .deb put it, with the plugins). It keeps whatever the plugin starts below it and ends it all
/// when the plugin exits, when hammock dies however it dies, or on `endGuardedPlugin`.
public enum PluginGuard {
    public static let programName = "hammock-guard"

    /// Where the guard is, looked for once, beside the running executable (a test executable too: SwiftPM
    /// builds the products and the tests into one folder), then in its `../libexec/hammock`.
    public static let location: Result<String, Missing> = find(in: PluginResolver.currentExecutableDirectory)

    static func find(in directory: String?) -> Result<String, Missing> {
        guard let directory else { return .failure(Missing(path: nil)) }
        let places = PluginResolver.companionPaths(programName, executableDirectory: directory)
        for path in places where access(path, X_OK) == 0 { return .success(path) }
        return .failure(Missing(path: places.joined(separator: " nor at ")))
    }

    /// Without the guard no plugin may start: no silent fallback that would let a plugin's processes outlive
    /// hammock.
    public struct Missing: Error, CustomStringConvertible {
        /// Where it was looked for; nil when the running executable's folder could not be read.
        public let path: String?

        public var description: String {
            guard let path else {
                return "cannot find \(PluginGuard.programName), which every plugin runs below: /proc/self/exe does not "
                    + "name hammock's folder, where it is looked for"
            }
            return "\(PluginGuard.programName), which every plugin runs below, is not at \(path) (or is not "
                + "executable): install it beside hammock, as it is built (`swift build` puts both in one folder)"
        }
    }
}
