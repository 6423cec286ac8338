/// Fills in `${NAME}` and `${NAME:-default}` from the environment; `$$` stands for a literal `$`.
///
/// Returns the text and the values that came from the environment, which the engine treats as secrets.
func interpolateEnvironment(
    _ text: String, environment: [String: String]
) -> Result<(text: String, secrets: [String]), InterpolationProblem> {
    guard text.contains("$") else { return .success((text, [])) }
    var result = ""
    var secrets: [String] = []
    var rest = Substring(text)
    while let dollar = rest.firstIndex(of: "$") {
        result += rest[..<dollar]
        let afterDollar = rest[rest.index(after: dollar)...]
        if afterDollar.first == "$" {
            result += "$"
            rest = afterDollar.dropFirst()
            continue
        }
        guard afterDollar.first == "{" else {
            result += "$"
            rest = afterDollar
            continue
        }
        guard let close = afterDollar.firstIndex(of: "}") else {
            return .failure(InterpolationProblem("unclosed \"${\"; write ${NAME} or ${NAME:-default}"))
        }
        let inner = afterDollar[afterDollar.index(after: afterDollar.startIndex)..<close]
        let name: Substring
        let fallback: Substring?
        if let separator = inner.firstRange(of: ":-") {
            name = inner[..<separator.lowerBound]
            fallback = inner[separator.upperBound...]
        } else {
            name = inner
            fallback = nil
        }
        guard !name.isEmpty, name.allSatisfy({ $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }),
            !(name.first?.isNumber ?? true)
        else {
            return .failure(InterpolationProblem("\"${\(inner)}\" is not a variable; write ${NAME} or ${NAME:-default}"))
        }
        if let value = environment[String(name)] {
            result += value
            if !value.isEmpty { secrets.append(value) }
        } else if let fallback {
            result += fallback
        } else {
            return .failure(
                InterpolationProblem(
                    "environment variable \(name) is not set (set it, or write ${\(name):-default} to give a default)"))
        }
        rest = afterDollar[afterDollar.index(after: close)...]
    }
    result += rest
    return .success((result, secrets))
}

struct InterpolationProblem: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
