// Drives a flame graph page in headless Chromium through the Chrome DevTools
// Protocol (playwright-core, installed by tests/integration/test_flamegraph.sh
// into the build folder; no browser download: the system's Debian chromium).
//   node check.js PAGE.html CHROMIUM NAME[,NAME...] CLICK_NAME
// Checks: no request leaves the page (self-contained), no script error,
// every NAME is a visible frame in the DOM, frame kinds carry their classes,
// hovering shows samples and share, searching highlights and sums matches,
// clicking CLICK_NAME zooms it to the full width (its width changes and
// frames outside it disappear), Escape resets. Prints PASS/FAIL lines and
// exits non-zero on any failure.
"use strict";

const path = require("path");
const { chromium } = require("playwright-core");

const [pageFile, chromiumPath, namesArg, clickName] = process.argv.slice(2);
if (!pageFile || !chromiumPath || !namesArg || !clickName) {
  console.error("usage: node check.js PAGE.html CHROMIUM NAME[,NAME...] CLICK_NAME");
  process.exit(2);
}
const names = namesArg.split(",");
let failed = 0;

function pass(what) { console.log("PASS " + what); }
function fail(what, why) { console.log("FAIL " + what + ": " + why); failed++; }
function check(what, ok, why) { if (ok) pass(what); else fail(what, why); }

// The frame whose text is exactly `name` (the zoom path may show an
// ancestor twice: the dimmed copy is skipped).
function frame(page, name) {
  return page.locator(".frame:not(.dim)").filter({ hasText: new RegExp("^" +
    name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$") }).first();
}

async function main() {
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const external = [];
    const errors = [];
    await page.route("**/*", (route) => {
      const url = route.request().url();
      if (url.startsWith("file:")) return route.continue();
      external.push(url);
      return route.abort();
    });
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });

    await page.goto("file://" + path.resolve(pageFile));
    await page.waitForSelector(".frame", { timeout: 10000 });

    for (const n of names) {
      const f = frame(page, n);
      const count = await f.count();
      const box = count ? await f.boundingBox() : null;
      check("frame '" + n + "' in the DOM and visible", count === 1 && box && box.width > 0,
            count ? "not visible" : "no frame with that text");
    }

    const kindOf = async (n) => (await frame(page, n).getAttribute("class")) || "";
    check("inline frame coloured as inline", (await kindOf("spin_inline")).includes("k-inline"),
          await kindOf("spin_inline"));
    check("kernel frame coloured as kernel", (await kindOf("do_syscall_64")).includes("k-kernel"),
          await kindOf("do_syscall_64"));
    check("native frame coloured as native", (await kindOf("main")).includes("k-native"),
          await kindOf("main"));

    // Hover: tooltip with samples and share.
    await frame(page, clickName).hover();
    const tip = page.locator("#tip");
    const tipText = (await tip.isVisible()) ? await tip.textContent() : "";
    check("hover shows samples and share", /\d+ samples, [\d.]+% of all/.test(tipText),
          JSON.stringify(tipText));

    // Search.
    await page.fill("#search", "^level");
    const matched = await page.locator(".frame.match").count();
    const matchedText = await page.locator("#matched").textContent();
    check("search highlights matching frames", matched >= 3, matched + " highlighted");
    check("search sums matched samples", /matched: \d+ samples \([\d.]+%\)/.test(matchedText),
          JSON.stringify(matchedText));
    await page.fill("#search", "");

    // Click to zoom.
    const graphWidth = (await page.locator("#fg").boundingBox()).width;
    const before = (await frame(page, clickName).boundingBox()).width;
    const outsider = names.find((n) => n === "read_zero_loop") || null;
    await frame(page, clickName).click();
    const zoomed = await page.waitForFunction(
      () => document.getElementById("fg").getAttribute("data-zoom") !== "0", null,
      { timeout: 5000 }).then(() => true, () => false);
    check("click changes the zoomed frame", zoomed, "data-zoom still 0 after 5 s");
    const after = (await frame(page, clickName).boundingBox()).width;
    check("click zooms the frame to the full width",
          Math.abs(after - graphWidth) <= 2 && after - before > 2,
          "width " + before.toFixed(1) + " -> " + after.toFixed(1) + ", graph " + graphWidth.toFixed(1));
    if (outsider)
      check("frames outside the zoomed one are hidden", (await frame(page, outsider).count()) === 0,
            outsider + " still drawn");
    const dimmed = await page.locator(".frame.dim").count();
    check("ancestors of the zoomed frame stay, dimmed", dimmed >= 1, dimmed + " dimmed");

    await page.keyboard.press("Escape");
    const zoom = await page.locator("#fg").getAttribute("data-zoom");
    const reset = (await frame(page, clickName).boundingBox()).width;
    check("Escape resets the zoom", zoom === "0" && Math.abs(reset - before) <= 1,
          "zoom " + zoom + ", width " + reset.toFixed(1));

    check("no network request", external.length === 0, external.join(" "));
    check("no script error", errors.length === 0, errors.join(" | "));
  } finally {
    await browser.close();
  }
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
  console.log("FAIL browser session: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
