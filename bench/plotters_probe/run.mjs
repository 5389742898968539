// Opens base/ and plot/ of the probe three times each and prints the draw times (ms).
const modules = process.argv[2];
const { chromium } = await import(`${modules}/playwright-core/index.mjs`);
const b = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
for (let r = 0; r < 3; r++) {
  for (const d of ["base", "plot"]) {
    const p = await b.newPage();
    await p.goto(`http://127.0.0.1:18777/${d}/index.html`);
    await p.waitForFunction(() => window.result, null, { timeout: 30000 });
    console.log(d, JSON.stringify(await p.evaluate(() => window.result)));
    await p.close();
  }
}
await b.close();
