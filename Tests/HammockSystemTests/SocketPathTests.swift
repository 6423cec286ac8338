import Glibc
import Testing

@testable import HammockSystem

/// Where a configuration's engine listens (`SocketPath`), and the folder it listens in, on the real file
/// system.
@Suite(.timeLimit(.minutes(1)))
struct SocketPathTests {
    static let runtime = ["XDG_RUNTIME_DIR": "/run/user/1000"]

    /// The hash is part of the protocol between consumers: an `attach` of one build must find the engine a
    /// `serve` of another build started. This pins FNV-1a's value (worked out apart, in Python).
    @Test("the path is the runtime folder's hammock/, the base name and a pinned FNV-1a hash of the canonical path")
    func underTheRuntimeFolder() {
        let path = SocketPath.forConfiguration(
            canonicalPath: "/home/user/.config/hammock/bar.yaml", environment: Self.runtime)
        #expect(path == "/run/user/1000/hammock/bar-63374e3678507c98.sock")
        let trailingSlash = SocketPath.forConfiguration(
            canonicalPath: "/home/user/.config/hammock/bar.yaml", environment: ["XDG_RUNTIME_DIR": "/run/user/1000/"])
        #expect(trailingSlash == path)
    }

    @Test("without XDG_RUNTIME_DIR, or with it empty, the path is under /tmp/hammock-UID")
    func fallbackUnderTmp() {
        let expected = "/tmp/hammock-\(getuid())/bar-63374e3678507c98.sock"
        for environment in [[:], ["XDG_RUNTIME_DIR": ""], ["HOME": "/home/user"]] {
            #expect(
                SocketPath.forConfiguration(canonicalPath: "/home/user/.config/hammock/bar.yaml", environment: environment)
                    == expected)
        }
    }

    @Test("two files of the same name in two folders get two sockets, each named after the file")
    func sameNameInTwoFolders() {
        let first = SocketPath.forConfiguration(canonicalPath: "/home/user/a/bar.yaml", environment: Self.runtime)
        let second = SocketPath.forConfiguration(canonicalPath: "/home/user/b/bar.yaml", environment: Self.runtime)
        #expect(first != second)
        #expect(first.hasPrefix("/run/user/1000/hammock/bar-"))
        #expect(second.hasPrefix("/run/user/1000/hammock/bar-"))
    }

    @Test("the base name loses its extension and keeps only [A-Za-z0-9._-]; a leading dot is not an extension")
    func baseNameIsReduced() {
        let spaced = "/x/my bar (2).v1.yaml"
        #expect(
            SocketPath.forConfiguration(canonicalPath: spaced, environment: Self.runtime)
                == "/run/user/1000/hammock/my_bar__2_.v1-\(hash(spaced)).sock")
        let accented = "/x/barré.yml"
        #expect(
            SocketPath.forConfiguration(canonicalPath: accented, environment: Self.runtime)
                == "/run/user/1000/hammock/barr__-\(hash(accented)).sock")
        #expect(SocketPath.baseName(of: "/x/.hammock") == ".hammock")
        #expect(SocketPath.baseName(of: "/x/config") == "config")
    }

    @Test("a very long base name is shortened so the path stays within 107 bytes; the hash is never cut")
    func longNameStaysWithinSunPath() {
        let long = "/home/user/" + String(repeating: "a", count: 300) + ".yaml"
        let digits = hash(long)
        let path = SocketPath.forConfiguration(canonicalPath: long, environment: Self.runtime)
        #expect(path.utf8.count == 107)
        #expect(SocketPath.maximumLength == 107)
        #expect(path.hasSuffix("a-\(digits).sock"))
        // A runtime folder so long that no base name fits: the hash alone names the socket.
        let deep = ["XDG_RUNTIME_DIR": "/" + String(repeating: "r", count: 75)]
        let hashOnly = SocketPath.forConfiguration(canonicalPath: long, environment: deep)
        #expect(hashOnly == "/" + String(repeating: "r", count: 75) + "/hammock/\(digits).sock")
        #expect(hashOnly.utf8.count <= 107)
    }

    @Test("prepareFolder makes a missing folder 0700, and accepts it again")
    func makesThePrivateFolder() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let socket = root.file("hammock/bar.sock")
        try SocketPath.prepareFolder(of: socket)
        #expect(fileMode(root.file("hammock"))?.type == S_IFDIR)
        #expect(fileMode(root.file("hammock"))?.permissions == 0o700)
        try SocketPath.prepareFolder(of: socket)
    }

    @Test("prepareFolder refuses a symlink to a folder, even a private one, and says so")
    func refusesASymlink() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        #expect(mkdir(root.file("real"), 0o700) == 0)
        #expect(symlink(root.file("real"), root.file("hammock")) == 0)
        let error = try #require(throws: SocketError.self) { try SocketPath.prepareFolder(of: root.file("hammock/bar.sock")) }
        #expect(error.path == root.file("hammock"))
        #expect(error.description.contains("symbolic link"), "\(error)")
    }

    @Test("prepareFolder refuses a folder open to group or others (0755), and names its mode")
    func refusesAnOpenFolder() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        #expect(mkdir(root.file("hammock"), 0o700) == 0)
        #expect(chmod(root.file("hammock"), 0o755) == 0)
        let error = try #require(throws: SocketError.self) { try SocketPath.prepareFolder(of: root.file("hammock/bar.sock")) }
        #expect(error.path == root.file("hammock"))
        #expect(error.description.contains("0755"), "\(error)")
        #expect(fileMode(root.file("hammock"))?.permissions == 0o755, "the folder is left as it was")
    }

    @Test("prepareFolder refuses a file where the folder should be")
    func refusesAFile() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let file = open(root.file("hammock"), O_CREAT | O_WRONLY, 0o600)
        close(file)
        let error = try #require(throws: SocketError.self) { try SocketPath.prepareFolder(of: root.file("hammock/bar.sock")) }
        #expect(error.description.contains("not a directory"), "\(error)")
    }

    @Test("prepareFolder refuses a private folder that another user owns", .enabled(if: getuid() == 0, "needs root to chown"))
    func refusesAnotherUsersFolder() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        #expect(mkdir(root.file("hammock"), 0o700) == 0)
        #expect(chown(root.file("hammock"), 65534, 65534) == 0)
        let error = try #require(throws: SocketError.self) { try SocketPath.prepareFolder(of: root.file("hammock/bar.sock")) }
        #expect(error.description.contains("belongs to user 65534"), "\(error)")
    }

    @Test("prepareFolder makes only the last folder: a missing parent is ENOENT, named")
    func missingParent() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let error = try #require(throws: SocketError.self) {
            try SocketPath.prepareFolder(of: root.file("absent/hammock/bar.sock"))
        }
        #expect(error.code == ENOENT)
        #expect(error.path == root.file("absent/hammock"))
    }
}

/// The 16 hex digits of a path's FNV-1a hash, as the socket's name has them.
private func hash(_ path: String) -> String {
    let digits = String(SocketPath.fnv1a(path), radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
}
