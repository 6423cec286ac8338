import FoundationEssentials
import Glibc
import HammockCore

/// Finds the program that serves a kind, in the order the specification gives:
/// `plugins.K.command` in the configuration; else `hammock-plugin-K` beside the hammock executable (or in
/// `../libexec/hammock` from it, where scripts/install and the .deb put plugins, off the user's PATH); else on
/// `HAMMOCK_PLUGIN_PATH`; else on `PATH`.
public struct PluginResolver: Sendable {
    public var configured: [Kind: PluginDefinition]
    public var executableDirectory: String?
    public var environment: [String: String]

    public init(
        configured: [Kind: PluginDefinition] = [:], executableDirectory: String? = PluginResolver.currentExecutableDirectory,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        self.configured = configured
        self.executableDirectory = executableDirectory
        self.environment = environment
    }

    /// The argv that starts the plugin for `kind`, or `nil` when none is found.
    public func command(for kind: Kind) -> [String]? {
        if let definition = configured[kind] { return definition.command }
        let name = "hammock-plugin-\(kind)"
        for directory in searchDirectories {
            let path = directory + "/" + name
            if access(path, X_OK) == 0 { return [path] }
        }
        return nil
    }

    /// Says where `command(for:)` looked, for the "unknown kind" message.
    public func searchDescription(for kind: Kind) -> String {
        var places = ["plugins.\(kind).command", "hammock-plugin-\(kind)"]
        if let executableDirectory { places[1] += " in \(executableDirectory) and \(Self.libexec(executableDirectory))" }
        places.append("HAMMOCK_PLUGIN_PATH")
        places.append("PATH")
        return places.joined(separator: ", ")
    }

    private var searchDirectories: [String] {
        var directories: [String] = []
        if let executableDirectory { directories += [executableDirectory, Self.libexec(executableDirectory)] }
        for variable in ["HAMMOCK_PLUGIN_PATH", "PATH"] {
            directories += (environment[variable] ?? "").split(separator: ":").map(String.init)
        }
        return directories
    }

    /// Where a program shipped with hammock (the guard, the relay) may be, in the order to look: beside the
    /// executable in `executableDirectory` (as `swift build` leaves it), then in its `../libexec/hammock` (as
    /// scripts/install and the .deb put it).
    public static func companionPaths(_ name: String, executableDirectory: String) -> [String] {
        [executableDirectory + "/" + name, libexec(executableDirectory) + "/" + name]
    }

    /// `PREFIX/libexec/hammock` for an executable in `PREFIX/bin`.
    public static func libexec(_ executableDirectory: String) -> String {
        let trimmed = executableDirectory.hasSuffix("/") ? String(executableDirectory.dropLast()) : executableDirectory
        guard let slash = trimmed.lastIndex(of: "/") else { return "libexec/hammock" }
        return trimmed[..<slash] + "/libexec/hammock"
    }

    /// The running program's own path (`/proc/self/exe`).
    public static var currentExecutablePath: String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The folder of the running executable, read from `/proc/self/exe` so a symlinked or relative
    /// invocation still finds the plugins shipped beside the real binary.
    public static var currentExecutableDirectory: String? {
        guard let path = currentExecutablePath else { return nil }
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
