import Glibc

extension SocketPath {
    /// `path` with every symbolic link, `.` and `..` resolved: what names a configuration's socket, and what
    /// its engine tells each client in `hello`, so that `hammock attach ./bar.yaml` and
    /// `hammock attach ~/.config/hammock/bar.yaml` meet at one engine. Nil when the file does not exist.
    public static func canonical(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The socket of the configuration `file`: `explicit` (`--socket`) when given, else the default one
    /// (`forConfiguration`) under the caller's environment. Nil when the file does not exist.
    public static func of(configuration file: String, explicit: String?, environment: [String: String]) -> String? {
        if let explicit { return explicit }
        return canonical(file).map { forConfiguration(canonicalPath: $0, environment: environment) }
    }
}
