import FoundationEssentials
import Glibc

/// What `${…}` reads: the environment, and files for the secret forms.
struct InterpolationContext {
    var environment: [String: String]
    /// Relative `${file:PATH}` paths are read from the configuration file's folder, so a configuration and
    /// the secret beside it work from any working directory.
    var configurationDirectory: String

    /// A secret file larger than this is refused: it is not a token, and reading it whole would only waste
    /// memory (and could hang on a FIFO or a device).
    static let maximumSecretFileSize = 64 << 10
}

/// The text with every `${…}` filled in, and the values that went into it.
struct Interpolation {
    var text: String
    /// Values from `${NAME}` and `${NAME:-default}`: secrets or not depending on where the text goes.
    var values: [String] = []
    /// Values from `${secret:NAME}`, `${file:PATH}` and `${cred:NAME}`: secrets wherever they go.
    var secrets: [String] = []
}

/// Fills in `${NAME}`, `${NAME:-default}`, `${secret:NAME}`, `${file:PATH}` and `${cred:NAME}`; `$$` stands
/// for a literal `$`.
func interpolate(_ text: String, in context: InterpolationContext) -> Result<Interpolation, InterpolationProblem> {
    guard text.contains("$") else { return .success(Interpolation(text: text)) }
    var result = Interpolation(text: "")
    var rest = Substring(text)
    while let dollar = rest.firstIndex(of: "$") {
        result.text += rest[..<dollar]
        let afterDollar = rest[rest.index(after: dollar)...]
        if afterDollar.first == "$" {
            result.text += "$"
            rest = afterDollar.dropFirst()
            continue
        }
        guard afterDollar.first == "{" else {
            result.text += "$"
            rest = afterDollar
            continue
        }
        guard let close = afterDollar.firstIndex(of: "}") else {
            return .failure(InterpolationProblem("unclosed \"${\"; write ${NAME} or ${NAME:-default}"))
        }
        let inner = afterDollar[afterDollar.index(after: afterDollar.startIndex)..<close]
        switch resolve(inner, in: context) {
        case .success(.plain(let value)):
            result.text += value
            if !value.isEmpty { result.values.append(value) }
        case .success(.secret(let value)):
            result.text += value
            if !value.isEmpty { result.secrets.append(value) }
        case .failure(let problem):
            return .failure(problem)
        }
        rest = afterDollar[afterDollar.index(after: close)...]
    }
    result.text += rest
    return .success(result)
}

private enum Resolved {
    case plain(String)
    case secret(String)
}

private func resolve(_ inner: Substring, in context: InterpolationContext) -> Result<Resolved, InterpolationProblem> {
    if let path = inner.dropPrefix("file:") {
        return readSecretFile(String(path), form: "${file:\(path)}", in: context).map(Resolved.secret)
    }
    if let name = inner.dropPrefix("cred:") {
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else {
            return .failure(InterpolationProblem("\"${cred:\(name)}\" must name a credential, e.g. ${cred:api-token}"))
        }
        guard let directory = context.environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty else {
            return .failure(
                InterpolationProblem(
                    "${cred:\(name)} reads $CREDENTIALS_DIRECTORY, which is not set (systemd sets it for a service with LoadCredential=\(name):…)"
                ))
        }
        return readSecretFile(directory + "/" + name, form: "${cred:\(name)}", in: context).map(Resolved.secret)
    }
    if let name = inner.dropPrefix("secret:") {
        guard isVariableName(name) else {
            return .failure(InterpolationProblem("\"${secret:\(name)}\" must name an environment variable, e.g. ${secret:API_TOKEN} (a secret has no default)"))
        }
        guard let value = context.environment[String(name)] else {
            return .failure(InterpolationProblem("environment variable \(name) is not set (it is read by ${secret:\(name)})"))
        }
        return .success(.secret(value))
    }
    let name: Substring
    let fallback: Substring?
    if let separator = inner.firstRange(of: ":-") {
        name = inner[..<separator.lowerBound]
        fallback = inner[separator.upperBound...]
    } else {
        name = inner
        fallback = nil
    }
    guard isVariableName(name) else {
        return .failure(
            InterpolationProblem(
                "\"${\(inner)}\" is not a variable; write ${NAME}, ${NAME:-default}, ${secret:NAME}, ${file:PATH} or ${cred:NAME}"))
    }
    if let value = context.environment[String(name)] { return .success(.plain(value)) }
    if let fallback { return .success(.plain(String(fallback))) }
    return .failure(
        InterpolationProblem("environment variable \(name) is not set (set it, or write ${\(name):-default} to give a default)"))
}

/// A secret file's content without its final newline: the way Docker and Kubernetes secrets and systemd
/// credentials arrive, and how `echo token > file` writes one.
private func readSecretFile(_ path: String, form: String, in context: InterpolationContext) -> Result<String, InterpolationProblem> {
    var resolved = path
    if resolved.hasPrefix("~/"), let home = context.environment["HOME"] { resolved = home + resolved.dropFirst() }
    if !resolved.hasPrefix("/") { resolved = context.configurationDirectory + "/" + resolved }
    var info = stat()
    guard stat(resolved, &info) == 0 else {
        return .failure(InterpolationProblem("\(form): cannot read \(resolved): \(String(cString: strerror(errno)))"))
    }
    guard info.st_mode & S_IFMT == S_IFREG else {
        return .failure(InterpolationProblem("\(form): \(resolved) is not a regular file"))
    }
    guard Int(info.st_size) <= InterpolationContext.maximumSecretFileSize else {
        return .failure(
            InterpolationProblem(
                "\(form): \(resolved) is \(info.st_size) bytes, more than a secret's limit of \(InterpolationContext.maximumSecretFileSize)"))
    }
    guard let data = FileManager.default.contents(atPath: resolved) else {
        return .failure(InterpolationProblem("\(form): cannot read \(resolved): \(String(cString: strerror(errno)))"))
    }
    guard var text = String(data: data, encoding: .utf8) else {
        return .failure(InterpolationProblem("\(form): \(resolved) is not UTF-8 text"))
    }
    // "\r\n" is one Character, so it must be asked for by itself.
    if text.hasSuffix("\n") || text.hasSuffix("\r\n") { text.removeLast() }
    return .success(text)
}

private func isVariableName(_ name: Substring) -> Bool {
    !name.isEmpty && name.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
        && !(name.first?.isNumber ?? true)
}

extension Substring {
    fileprivate func dropPrefix(_ prefix: String) -> Substring? {
        hasPrefix(prefix) ? dropFirst(prefix.count) : nil
    }
}

struct InterpolationProblem: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
