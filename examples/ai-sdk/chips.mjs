// The chip of an inline citation (a `data-citation` part's `data`), from its target, as the service's own
// pages draw it (docs/pages.md): a label, and where it links (null: no link). `provider` is never shown.
const HTTP = /^https?:\/\//i;

const accountPath = (accountId) => `/accounts/${encodeURIComponent(accountId)}`;

export function citationChip(citation) {
  const target = citation.target;
  const title = citation.title ?? citation.source;
  switch (target?.kind) {
    case "web":
    case "tax_reference":
    case "card_document":
    case "mortgage_reference":
      return { label: title, href: HTTP.test(target.url ?? "") ? target.url : null };
    case "account":
      return { label: title, href: accountPath(target.accountId) };
    case "accounts":
      return { label: `${target.accounts.length} accounts`, href: null, links: target.accounts.map((a) => accountPath(a.accountId)) };
    case "portfolio":
      return { label: "Your portfolio", href: "/portfolio/" };
    case "market_data":
      return { label: target.ticker, href: null };
    case "analysis":
      return { label: citation.source === "silvia://market-data/finnhub" ? "Live data" : "Analysis", href: null };
    default: // untyped, or a kind this page does not know: fall back on the source and title
      return { label: title, href: HTTP.test(citation.source) ? citation.source : null };
  }
}
